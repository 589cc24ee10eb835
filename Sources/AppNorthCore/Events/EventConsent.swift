import Synchronization

/// Consent: the choice, its persistence and its adoption across handles.
extension AppNorthEvents {
    // MARK: Consent

    package var consent: ConsentState {
        refreshConsent()
        return state.withLock { $0.consent }
    }

    /// Persists the choice and announces it to every other handle on the
    /// data directory, in this process or another (ConsentWatch), which
    /// acts on it as if it had made it.
    ///
    /// Granting queues only events tracked from then on. Revoking purges
    /// the queue, and once it returns nothing tracked before it is sent, by
    /// any handle on the directory: the upload in progress here is
    /// cancelled and its batch never retried; a `track` racing the
    /// revocation is waited for and purged; other handles' journaled events
    /// can no longer enter the table (their journals carry the old consent
    /// epoch) and are purged; and the call waits (up to 10 s) for upload
    /// attempts other handles started before it to end. Those are let
    /// finish rather than cancelled: their events had left before the
    /// revocation, and an aborted request may still be stored by the server,
    /// so only waiting lets "returned" mean "nothing more arrives". No
    /// attempt starts after it. In the other handles, a `track` that starts
    /// after this call returned is dropped; one that raced it is purged.
    package func setConsent(analytics granted: Bool) throws(AppNorthError) {
        try whileOpen { _ in }
        try consentChanges.withLock { _ throws(AppNorthError) in
            // An older change by another handle is acted on first.
            try adoptLocked()
            if granted {
                try db.kvPut(namespace: ConsentRecord.namespace, key: ConsentRecord.choiceKey,
                             value: Array(ConsentState.granted.name.utf8), updatedMs: clock.wallMilliseconds())
                state.withLock { apply(.granted, to: &$0) }
            } else {
                state.withLock { s in
                    apply(.revoked, to: &s)
                    s.consentGeneration &+= 1
                    s.inFlight?.cancel()
                }
                // Tracks that passed their check before the flip finish
                // their journal writes inside the purge, which takes them too.
                let purged = try store.revoke(nowMs: clock.wallMilliseconds())
                counters.drop(purged, .consent)
            }
            consentWatch.announce(revocation: !granted)
        }
        if !granted && !consentWatch.waitForUploads(timeoutMilliseconds: 10_000) {
            logger.log(.warning, "events: consent revoked, but an upload of another handle on this data directory "
                       + "did not stop within 10 s")
        }
    }

    /// Adopts another handle's consent change, if there is one: the cheap
    /// check of `track`, the upload thread and the getters.
    func refreshConsent() {
        if consentWatch.hasChanged { adoptSharedConsent() }
    }

    /// Adopts the stored choice after another handle changed it. A failure
    /// is logged and retried at the next check; meanwhile nothing this
    /// handle journals can be uploaded if the change was a revocation
    /// (its journal's epoch is older than the stored count).
    func adoptSharedConsent() {
        do throws(AppNorthError) {
            try consentChanges.withLock { _ throws(AppNorthError) in try adoptLocked() }
        } catch {
            logger.log(.warning, "events: cannot read the consent choice another handle stored: \(error.message)")
        }
    }

    /// `adoptSharedConsent` with `consentChanges` held. A revocation since
    /// the last adoption (the stored count moved) is acted on as this
    /// handle's own: tracking stops, the batch being uploaded is never
    /// retried, and the journal is purged; then the stored choice, which
    /// may be a later grant, takes over.
    func adoptLocked() throws(AppNorthError) {
        guard consentWatch.hasChanged else { return }
        // Counters before the stored rows: every change they count is in them.
        let changes = consentWatch.changes
        let revocations = consentWatch.revocations
        let stored = try Self.loadConsent(db, logger: logger)
        if stored.epoch != store.journal.epoch.load(ordering: .acquiring) {
            // The attempt in progress, if any, is let finish: the revoking
            // handle waits for it (see setConsent); cancelling it could
            // leave the server storing a batch after that call returned.
            state.withLock { s in
                apply(.revoked, to: &s)
                s.consentGeneration &+= 1
            }
            let purged = try store.purgeJournal(epoch: stored.epoch)
            counters.drop(purged, .consent)
            logger.log(.info, "events: another handle on this data directory revoked consent; purged \(purged) journaled event(s)")
        }
        state.withLock { s in
            apply(stored.choice, to: &s)
            s.revocationsAdopted = revocations
        }
        consentWatch.adopted(changes)
    }

    /// Sets the consent state and the flag `track` reads from it. Every
    /// change of `consent` goes through here, under the state lock.
    func apply(_ value: ConsentState, to s: inout State) {
        s.consent = value
        trackingAllowed.store(s.allowsTracking(requireConsent: options.requireConsent), ordering: .sequentiallyConsistent)
    }

    /// The stored choice and revocation count. A damaged choice row is
    /// deleted and logged, and the choice is unknown again: the host asks
    /// the user anew.
    static func loadConsent(_ db: SQLiteStore, logger: Logger) throws(AppNorthError)
        -> (choice: ConsentState, epoch: Int64) {
        let (choice, epoch) = try db.withConnection { conn throws(AppNorthError) in
            (try ConsentRecord.choice(conn), try ConsentRecord.revocations(conn))
        }
        guard choice == .unknown else { return (choice ?? .unknown, epoch) }
        try db.kvDelete(namespace: ConsentRecord.namespace, key: ConsentRecord.choiceKey)
        logger.log(.warning, "event queue: dropped a damaged consent row; consent is unknown again")
        return (.unknown, epoch)
    }
}
