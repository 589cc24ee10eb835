import Synchronization

/// Who the queue's events are from: the identity (anonymous id, user id,
/// push token: `Identity`, kept in the secure store) and the session, and
/// the identity tail every event carries (`EventPayload.identityTail`),
/// rebuilt whenever either changes. One owner with its own lock, a leaf
/// (inside it only `Identity`'s own leaf lock is taken).
///
/// `track` compares `tailGeneration` with its stripe's copy (one atomic
/// load) and reads `tail` only when it moved.
final class EventSender: Sendable {
    let identity: Identity
    private struct Current {
        var sessionID: String
        var tail: [UInt8]
    }
    private let current: Lock<Current>
    /// Moves whenever the tail changes.
    let tailGeneration = Atomic<UInt64>(1)

    init(identity: Identity, sessionID: String = Random.hexToken(bytes: 16)) {
        self.identity = identity
        let who = identity.both
        current = Lock(Current(sessionID: sessionID, tail: EventPayload.identityTail(
            anonymousID: who.anonymousID, userID: who.userID, sessionID: sessionID)), level: LockLevel.eventSender)
    }

    var sessionID: String { current.withLock { $0.sessionID } }

    /// The tail and its generation, read together.
    var tail: (bytes: [UInt8], generation: UInt64) {
        current.withLock { ($0.tail, tailGeneration.load(ordering: .relaxed)) }
    }

    /// A new app session: a new session id in every later event.
    func newSession(_ sessionID: String = Random.hexToken(bytes: 16)) {
        rebuild { $0.sessionID = sessionID }
    }

    /// Sets (or, nil, clears) the user id, stored through the secure store.
    func identify(_ userID: String?) throws(AppNorthError) {
        try identity.identify(userID)
        // Read again under the lock: of two racing calls, the later rebuild
        // sees the later value.
        rebuild { _ in }
    }

    private func rebuild(_ change: (inout Current) -> Void) {
        current.withLock {
            change(&$0)
            let who = identity.both
            $0.tail = EventPayload.identityTail(anonymousID: who.anonymousID, userID: who.userID, sessionID: $0.sessionID)
            tailGeneration.add(1, ordering: .releasing)
        }
    }
}
