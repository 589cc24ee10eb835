import Synchronization

/// Who the queue's events are from: the identity (anonymous id, user id,
/// push token: `Identity`, kept in the secure store) and the session, and
/// the identity tail every event carries (`EventPayload.identityTail`),
/// rebuilt whenever either changes. One owner with its own lock, a leaf
/// (inside it only `Identity`'s own leaf lock is taken).
///
/// `track` compares `tailGeneration` with its stripe's copy (one atomic
/// load) and reads `tail` only when it moved.
///
/// Sessions rotate when an event is made (`rotateIfDue`, by `policy`):
/// a session starts when the handle opens, at `newSession` (the host's
/// `start_session`), and at the first event made after `policy`'s idle
/// gap or maximum length; each event's time is its own timestamp.
final class EventSender: Sendable {
    let identity: Identity
    let policy: SessionPolicy
    private struct Current {
        var sessionID: String
        var tail: [UInt8]
        /// The data directory's super properties as last read.
        var superProperties = SuperProperties()
    }
    private let current: Lock<Current>
    /// Moves whenever the tail changes.
    let tailGeneration = Atomic<UInt64>(1)
    /// When the current session started, and the time of its last event
    /// (wall ms; written under `current`'s lock, `lastEventMs` also by
    /// `track` when it moves forward).
    private let sessionStartMs: Atomic<Int64>
    private let lastEventMs: Atomic<Int64>
    /// The directory's super properties (nil: none, in tests), the change
    /// counter as of the copy in `current`, and whether that copy has any.
    let superFile: SuperPropertiesFile?
    private let superSeen = Atomic<UInt64>(.max)
    private let hasSuperProperties = Atomic<Bool>(false)

    init(identity: Identity, sessionID: String = Random.hexToken(bytes: 16), policy: SessionPolicy = SessionPolicy(),
         nowMs: Int64 = 0, superFile: SuperPropertiesFile? = nil) {
        self.identity = identity
        self.policy = policy
        self.superFile = superFile
        sessionStartMs = Atomic(nowMs)
        lastEventMs = Atomic(nowMs)
        let who = identity.both
        current = Lock(Current(sessionID: sessionID, tail: EventPayload.identityTail(
            anonymousID: who.anonymousID, userID: who.userID, sessionID: sessionID)), level: LockClass.eventSender)
        if let superFile { reloadSuperProperties(superFile, superFile.changes) }
    }

    /// The super properties `track` merges into an event, nil when there
    /// are none: one shared load, one compare and one flag while nothing
    /// changed; after a change (any handle's, any process's: the counter
    /// in `consent.watch` moved) the file is read again, once.
    @inline(__always)
    func superProperties() -> SuperProperties? {
        guard let superFile else { return nil }
        let changes = superFile.changes
        if changes != superSeen.load(ordering: .relaxed) { reloadSuperProperties(superFile, changes) }
        guard hasSuperProperties.load(ordering: .relaxed) else { return nil }
        return current.withLock { $0.superProperties }
    }

    /// Reads the file (no lock held) and keeps what it holds as of
    /// `changes`, read before it. Two racing reloads may keep the older
    /// copy, with the older counter: the next event reads it again.
    @inline(never)
    private func reloadSuperProperties(_ file: SuperPropertiesFile, _ changes: UInt64) {
        let value = file.read()
        current.withLock {
            $0.superProperties = value
            hasSuperProperties.store(!value.isEmpty, ordering: .relaxed)
            superSeen.store(changes, ordering: .relaxed)
        }
    }

    var sessionID: String { current.withLock { $0.sessionID } }

    /// Called by `track` with the event's time, before it reads the tail:
    /// starts a new session when `policy` says the current one is over,
    /// and notes the event's time. Two loads and a compare while nothing
    /// is due (a store when the millisecond moved). Two threads finding it
    /// due together rotate once: the second sees the first's times under
    /// the lock.
    @inline(__always)
    func rotateIfDue(nowMs: Int64) {
        let last = lastEventMs.load(ordering: .relaxed)
        if policy.isDue(now: nowMs, start: sessionStartMs.load(ordering: .relaxed), last: last) {
            return rotate(nowMs: nowMs)
        }
        if nowMs > last { lastEventMs.store(nowMs, ordering: .relaxed) }
    }

    @inline(never)
    private func rotate(nowMs: Int64) {
        rebuild { c in
            let start = sessionStartMs.load(ordering: .relaxed), last = lastEventMs.load(ordering: .relaxed)
            guard policy.isDue(now: nowMs, start: start, last: last) else {
                if nowMs > last { lastEventMs.store(nowMs, ordering: .relaxed) }
                return false
            }
            c.sessionID = Random.hexToken(bytes: 16)
            sessionStartMs.store(nowMs, ordering: .relaxed)
            lastEventMs.store(nowMs, ordering: .relaxed)
            return true
        }
    }

    /// The tail and its generation, read together.
    var tail: (bytes: [UInt8], generation: UInt64) {
        current.withLock { ($0.tail, tailGeneration.load(ordering: .relaxed)) }
    }

    /// A new app session: a new session id in every later event; the
    /// idle gap and the maximum length count from `nowMs`.
    func newSession(_ sessionID: String = Random.hexToken(bytes: 16), nowMs: Int64) {
        rebuild {
            $0.sessionID = sessionID
            sessionStartMs.store(nowMs, ordering: .relaxed)
            lastEventMs.store(nowMs, ordering: .relaxed)
            return true
        }
    }

    /// Sets (or, nil, clears) the user id, stored through the secure store.
    func identify(_ userID: String?) throws(AppNorthError) {
        try identity.identify(userID)
        // Read again under the lock: of two racing calls, the later rebuild
        // sees the later value.
        rebuild { _ in true }
    }

    /// Runs `change` under the lock; when it returns true, rebuilds the tail.
    private func rebuild(_ change: (inout Current) -> Bool) {
        current.withLock {
            guard change(&$0) else { return }
            let who = identity.both
            $0.tail = EventPayload.identityTail(anonymousID: who.anonymousID, userID: who.userID, sessionID: $0.sessionID)
            tailGeneration.add(1, ordering: .releasing)
        }
    }
}

extension LockClass {
    /// `EventSender.current`: the session and identity events are sent with.
    static let eventSender = LockClass.leaf("EventSender.current")
}
