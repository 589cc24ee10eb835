import Synchronization

/// Consent: the choice, its persistence, its adoption across handles
/// (`ConsentWatch`), and the upload request a revocation cancels. One
/// owner with its own lock (`state`, a `ConsentGate` value and the request
/// in flight); `changes` serialises this handle's changes and adoptions of
/// others'. `track` reads `trackingAllowed` instead of taking the lock.
final class EventConsent: Sendable {
    /// Consent changes of other handles on the data directory.
    let watch: ConsentWatch
    /// Whether consent lets events in: what `track` reads (one atomic
    /// load). Written under `state` with the gate it mirrors.
    let trackingAllowed = Atomic<Bool>(false)
    private struct Guarded {
        var gate: ConsentGate
        /// The upload request in progress; a revocation cancels it.
        var inFlight: CancellationToken?
    }
    private let state: Lock<Guarded>
    /// Serialises this handle's consent changes and adoptions of others'.
    private let changes = Lock<Void>((), level: LockClass.consentChanges)
    private let db: SQLiteStore
    private let store: EventStore
    private let counters: EventCounters
    private let lifecycle: EventsLifecycle
    private let clock: any AppNorthClock
    private let logger: Logger

    /// `stored`: the choice read at open (`load`), before the store was
    /// opened under its epoch; `revocationsAdopted`: the watch's counter
    /// read before that.
    init(watch: ConsentWatch, stored: ConsentState, revocationsAdopted: UInt64, requireConsent: Bool, db: SQLiteStore,
         store: EventStore, counters: EventCounters, lifecycle: EventsLifecycle, clock: any AppNorthClock, logger: Logger) {
        self.watch = watch
        let gate = ConsentGate(choice: stored, revocationsAdopted: revocationsAdopted, requireConsent: requireConsent)
        state = Lock(Guarded(gate: gate), level: LockClass.consentState)
        trackingAllowed.store(gate.allowsTracking, ordering: .releasing)
        self.db = db
        self.store = store
        self.counters = counters
        self.lifecycle = lifecycle
        self.clock = clock
        self.logger = logger
    }

    /// The choice, after adopting another handle's change.
    var current: ConsentState {
        refresh()
        return state.withLock { $0.gate.choice }
    }

    /// Whether uploads may go, and the generation a batch is read under.
    var uploadGate: (allowed: Bool, generation: UInt64) {
        state.withLock { ($0.gate.allowsTracking, $0.gate.generation) }
    }

    var generation: UInt64 { state.withLock { $0.gate.generation } }

    /// Persists the choice and announces it to every other handle on the
    /// data directory, in this process or another (ConsentWatch), which
    /// acts on it as if it had made it. See `AppNorthEvents.setConsent`.
    func set(analytics granted: Bool) throws(AppNorthError) {
        try changes.withLock { _ throws(AppNorthError) in
            // An older change by another handle is acted on first.
            try adoptLocked()
            if granted {
                try db.kvPut(namespace: ConsentRecord.namespace, key: ConsentRecord.choiceKey,
                             value: Array(ConsentState.granted.name.utf8), updatedMs: clock.wallMilliseconds())
                change { $0.gate.set(.granted) }
            } else {
                change { s in
                    s.gate.revoke()
                    s.inFlight?.cancel()
                }
                // Tracks that passed their check before the flip finish
                // their journal writes inside the purge, which takes them too.
                let purged = try store.revoke(nowMs: clock.wallMilliseconds())
                counters.drop(purged, .consent)
            }
            watch.announce(revocation: !granted)
        }
        if !granted && !watch.waitForUploads(timeoutMilliseconds: 10_000) {
            logger.log(.warning, "events: consent revoked, but an upload of another handle on this data directory "
                       + "did not stop within 10 s")
        }
    }

    /// Adopts another handle's consent change, if there is one: the cheap
    /// check of `track`, the upload thread and the getters.
    func refresh() {
        if watch.hasChanged { adoptShared() }
    }

    /// Adopts the stored choice after another handle changed it. A failure
    /// is logged and retried at the next check; meanwhile nothing this
    /// handle journals can be uploaded if the change was a revocation
    /// (its journal's epoch is older than the stored count).
    func adoptShared() {
        do throws(AppNorthError) {
            try changes.withLock { _ throws(AppNorthError) in try adoptLocked() }
        } catch {
            logger.log(.warning, "events: cannot read the consent choice another handle stored: \(error.message)")
        }
    }

    /// `adoptShared` with `changes` held. A revocation since the last
    /// adoption (the stored count moved) is acted on as this handle's own:
    /// tracking stops, the batch being uploaded is never retried, and the
    /// journal is purged; then the stored choice, which may be a later
    /// grant, takes over.
    private func adoptLocked() throws(AppNorthError) {
        guard watch.hasChanged else { return }
        // Counters before the stored rows: every change they count is in them.
        let seen = watch.changes
        let revocations = watch.revocations
        let stored = try Self.load(db, logger: logger)
        if stored.epoch != store.journal.epoch.load(ordering: .acquiring) {
            // The attempt in progress, if any, is let finish: the revoking
            // handle waits for it (see `set`); cancelling it could leave the
            // server storing a batch after that call returned.
            change { $0.gate.revoke() }
            let purged = try store.purgeJournal(epoch: stored.epoch)
            counters.drop(purged, .consent)
            logger.log(.info, "events: another handle on this data directory revoked consent; purged \(purged) journaled event(s)")
        }
        change { $0.gate.adopt(stored.choice, revocations: revocations) }
        watch.adopted(seen)
    }

    /// Every change of the gate goes through here: the flag `track` reads
    /// is written under the lock with the gate it mirrors.
    private func change(_ body: (inout Guarded) -> Void) {
        state.withLock { s in
            body(&s)
            trackingAllowed.store(s.gate.allowsTracking, ordering: .sequentiallyConsistent)
        }
    }

    // MARK: The upload request a revocation cancels

    /// Registers the next attempt's request, unless consent was revoked
    /// since `generation`, here or by another handle (adopted or not), or
    /// the queue is closing.
    func beginAttempt(_ generation: UInt64) -> CancellationToken? {
        state.withLock { s -> CancellationToken? in
            guard s.gate.mayAttempt(generation, revocationsNow: watch.revocations), !lifecycle.isClosed else { return nil }
            let cancel = CancellationToken()
            s.inFlight = cancel
            return cancel
        }
    }

    /// The attempt's request has ended; returns true if consent was
    /// revoked since `generation` (its batch is then left alone).
    func endAttempt(_ generation: UInt64) -> Bool {
        state.withLock { s -> Bool in
            s.inFlight = nil
            return s.gate.generation != generation
        }
    }

    /// Cancels the request in flight (closing).
    func cancelInFlight() {
        state.withLock { $0.inFlight?.cancel() }
    }

    /// The stored choice and revocation count. A damaged choice row is
    /// deleted and logged, and the choice is unknown again: the host asks
    /// the user anew.
    static func load(_ db: SQLiteStore, logger: Logger) throws(AppNorthError) -> (choice: ConsentState, epoch: Int64) {
        let (choice, epoch) = try db.withConnection { conn throws(AppNorthError) in
            (try ConsentRecord.choice(conn), try ConsentRecord.revocations(conn))
        }
        guard choice == .unknown else { return (choice ?? .unknown, epoch) }
        try db.kvDelete(namespace: ConsentRecord.namespace, key: ConsentRecord.choiceKey)
        logger.log(.warning, "event queue: dropped a damaged consent row; consent is unknown again")
        return (.unknown, epoch)
    }
}

extension LockClass {
    /// `EventConsent.changes`: one consent change, or the adoption of another handle's.
    static let consentChanges = LockClass(rank: 5, "EventConsent.changes")
    /// `EventConsent.state`: the consent gate and the upload request a revocation cancels
    /// (taken inside `EventConsent.changes`; nothing but a cancel inside).
    static let consentState = LockClass(rank: 25, "EventConsent.state")
}
