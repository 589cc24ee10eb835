import Synchronization

/// The analytics event queue: durable, batched, retried, consent-aware.
///
/// `track` appends the event to this process's journal file before it
/// returns (`EventJournal`); the library thread moves journaled events into
/// SQLite (WAL) and uploads from there: every 30 s, as soon as 20 events wait, or when `flush`
/// asks, in batches sized by the network type. Failed requests are retried
/// 3 times (1 s, 2 s, 4 s with jitter); 5 consecutive failed upload cycles
/// (an attempt and its retries count as one) pause uploads until
/// `startSession()` or `foreground()`. Since only that thread
/// uploads, two flushes never send the same event at once; a crash after a
/// 2xx but before deletion may resend a batch, which the server
/// deduplicates by event id.
///
/// Thread-safe. `close` (or deinit) stops the upload thread.
public final class AppNorthEvents: Sendable {
    public let options: AppNorthEventsOptions
    public let client: AppNorthClient
    /// Internal (not private) for tests that read the journal's counters.
    let store: EventStore
    /// `store.journal`, for `track` to use without a retain: every thread's
    /// retain and release of the one journal object would write the same
    /// word. `store` holds it for as long as this object lives.
    private let journalRef: Unmanaged<EventJournal>
    private let db: SQLiteStore
    private let identity: Identity
    private let clock: any AppNorthClock
    private let logger: Logger
    private let state: Lock<State>
    private let flushDone = GenerationWaiter()
    private let shutdown = StreamCancellation()
    private let worker: Lock<BackgroundThread?> = Lock(nil)
    /// Set while the last upload cycle failed (the uploader waits for its
    /// timer then), so that `track` stops waking it.
    private let uploadsFailing = Atomic<Bool>(false)
    /// Consent changes of other handles on the data directory (ConsentWatch).
    private let consentWatch: ConsentWatch
    /// Serialises this handle's consent changes and adoptions of others'.
    private let consentChanges = Lock<Void>(())
    /// What `track` reads instead of taking the state lock (which every
    /// tracking thread would then share): whether consent lets events in,
    /// whether the queue is closed, and which identity tail is current.
    /// Each is written under the state lock with the state it mirrors.
    private let trackingAllowed = Atomic<Bool>(false)
    private let closedFlag = Atomic<Bool>(false)
    private let tailGeneration = Atomic<UInt64>(1)
    /// How `track`'s stripe publishes its counts (`EventStore.queuedAfterAppend`).
    private let countStep: (count: Int, bytes: Int)
    private let countMargin: (count: Int, bytes: Int)

    struct State {
        var consent: ConsentState
        var networkType: NetworkType
        var sessionID: String
        /// The identity and session part of every event (EventPayload):
        /// rebuilt by identify, reset and a new session.
        var eventTail: [UInt8] = []
        var breaker: CircuitBreaker
        var closed = false
        var flushRequested: UInt64 = 0
        var dropped: [String: Int] = [:]
        /// The most recent upload error, for stats.
        var lastError: AppNorthError?
        /// The error that ended the last upload cycle, for flush callers.
        var cycleError: AppNorthError?
        var lastFlushMs: Int64?
        var lastAttemptMs: Int64?
        /// Events the server has accepted since open (flush reports its share).
        var delivered = 0
        /// The uploader waits for this before its next request (Retry-After).
        var notBeforeMono: UInt64 = 0
        /// Moves on every revocation. A batch read under one generation is
        /// never sent under another.
        var consentGeneration: UInt64 = 0
        /// The upload request in progress; a revocation cancels it.
        var inFlight: StreamCancellation?
        /// The shared revocation counter (ConsentWatch) as of this handle's
        /// last adoption: an upload attempt goes only while it still reads so.
        var revocationsAdopted: UInt64 = 0

        func allowsTracking(requireConsent: Bool) -> Bool {
            consent == .granted || (consent == .unknown && !requireConsent)
        }
    }

    /// Opens the queue in `directory` and starts the upload thread.
    /// `secureStore` holds identity values (default: a 0600 file there).
    public init(client: AppNorthClient, directory: DataDirectory, options: AppNorthEventsOptions = AppNorthEventsOptions(),
                secureStore: (any AppNorthSecureStore)? = nil, clock: any AppNorthClock = SystemClock(),
                logger: Logger? = nil) throws(AppNorthError) {
        try options.validate()
        self.options = options
        self.client = client
        self.clock = clock
        self.logger = logger ?? client.configuration.logger
        db = try SQLiteStore(directory: directory)
        // The watch first: a change made after its counters are read is
        // adopted later; one made before is in the stored choice read next.
        consentWatch = try ConsentWatch(directory: directory)
        let revocationsAdopted = consentWatch.revocations
        let consent = try Self.loadConsent(db, logger: self.logger)
        store = try EventStore(db: db, directory: directory, epoch: consent.epoch, logger: self.logger)
        journalRef = Unmanaged.passUnretained(store.journal)
        let secrets: any AppNorthSecureStore
        if let secureStore { secrets = secureStore } else { secrets = try FileSecureStore(directory: directory) }
        identity = try Identity(store: secrets, clock: clock, logger: self.logger)
        state = Lock(State(consent: consent.choice, networkType: options.networkType,
                            sessionID: Random.hexToken(bytes: 16), breaker: CircuitBreaker(threshold: options.breakerThreshold),
                            revocationsAdopted: revocationsAdopted))
        trackingAllowed.store(consent.choice == .granted || (consent.choice == .unknown && !options.requireConsent),
                              ordering: .releasing)
        // A stripe publishes every `step` records (or bytes): a small part
        // of the limits, so that all stripes' unpublished records together
        // stay within `margin` of them. With small limits the step is 1:
        // every event counts at once, as without stripes. A flush threshold
        // below the margin (the default 20) makes every count exact while
        // uploads succeed (`nearThresholds`); while they fail, only the
        // limits matter to `track`.
        let stripes = EventJournal.stripeCount
        countStep = (max(1, min(32, options.maxQueuedEvents / (4 * stripes))),
                     max(1, min(32 << 10, options.maxQueuedBytes / (4 * stripes))))
        countMargin = (countStep.count * stripes, countStep.bytes * stripes)
        refreshEventTail()
        // Events an earlier run left on disk go out as soon as the thread
        // starts, not after the first 30 s timer or the 20th new event.
        let leftover = store.count
        if leftover > 0 {
            state.withLock { $0.flushRequested = 1 }
            self.logger.log(.debug, "events: \(leftover) event(s) left by an earlier run; uploading them now")
        }
        // The thread holds the queue only while it works, never while it
        // sleeps, so dropping the last reference (deinit) can stop it.
        // The flush interval counts from opening, not from whenever the
        // thread first runs.
        let opened = clock.monotonicNanoseconds()
        let thread = try BackgroundThread(name: "appnorth-events") { [weak self] thread in
            var memory = UploaderMemory(lastCycleMono: opened)
            while !thread.isStopping {
                guard let sleepMs = self?.uploaderStep(thread, &memory) else { break }
                if sleepMs > 0 { _ = thread.sleep(milliseconds: sleepMs) }
            }
            // Nobody waits in vain for a flush after the thread has stopped.
            self?.flushDone.advance(to: .max)
        }
        worker.withLock { $0 = thread }
    }

    deinit {
        shutdown.cancel()
        worker.withLock { $0 }?.stop()
    }

    // MARK: Tracking

    /// Queues an event durably. `propertiesJSON` must be a JSON object (or
    /// nil); it is stored and sent exactly as given. Returns false when the
    /// event was dropped because analytics consent is not given.
    @discardableResult
    public func track(_ name: String, propertiesJSON: String? = nil) throws(AppNorthError) -> Bool {
        // At most 256 bytes is at most 256 characters: count them only past that.
        guard !name.isEmpty && (name.utf8.count <= 256 || name.unicodeScalars.count <= 256) else {
            throw .invalidArgument("event name must be 1 to 256 characters")
        }
        if let propertiesJSON {
            // Measured before parsing: the event that carries them can only be larger.
            guard propertiesJSON.utf8.count <= options.maxEventBytes else {
                throw .tooLarge("event properties are \(propertiesJSON.utf8.count) bytes; the limit is \(options.maxEventBytes)")
            }
            try JSON.validateObject(propertiesJSON, what: "event properties")
        }
        // Another handle's consent change is adopted before this event is
        // judged by it: one load while nothing changed.
        if consentWatch.hasChanged { adoptSharedConsent() }
        // Everything from the consent check to the append runs under the
        // calling thread's stripe lock, which no other tracking thread
        // takes (EventJournal). A revocation flips `trackingAllowed`, then
        // rotates every stripe under its lock: a write that passed the
        // check is in the segment it purges, and a later one sees the flag.
        let timestampMs = clock.wallMilliseconds()
        let attempt = journalRef._withUnsafeGuaranteedRef { journal in
            let stripe = journal.currentStripe
            return Result { () throws(AppNorthError) -> TrackOutcome in
                try stripe.state.withLock { s throws(AppNorthError) -> TrackOutcome in
                    guard !closedFlag.load(ordering: .acquiring) else { return .closed }
                    guard trackingAllowed.load(ordering: .acquiring) else { return .notAllowed }
                    let generation = tailGeneration.load(ordering: .acquiring)
                    if s.tailGeneration != generation {
                        let (tail, current) = state.withLock { ($0.eventTail, tailGeneration.load(ordering: .relaxed)) }
                        // A copy of its own: the shared buffer's reference count
                        // would be written by every thread's events.
                        s.tail = tail.withUnsafeBufferPointer { Array($0) }
                        s.tailGeneration = current
                    }
                    EventPayload.build(into: &s.buffer, name: name, timestampMs: timestampMs, propertiesJSON: propertiesJSON,
                                       tail: s.tail, pool: &s.random)
                    let size = s.buffer.count
                    // A huge event's buffer is not kept for the small ones after it.
                    defer { if s.buffer.capacity > 64 << 10 { s.buffer = [] } }
                    guard size <= options.maxEventBytes else { return .tooLarge(size) }
                    try journal.append(&s, of: stripe)
                    return .queued(store.queuedAfterAppend(stripe, near: nearThresholds, step: countStep, margin: countMargin))
                }
            }
        }
        let outcome = try attempt.get()
        let queued: (count: Int, bytes: Int)
        switch outcome {
        case .closed: throw .wrongState("the event queue is closed")
        case .notAllowed:
            state.withLock { s in if !s.closed { s.dropped["consent", default: 0] += 1 } }
            return false
        case .tooLarge(let size): throw .tooLarge("event is \(size) bytes; the limit is \(options.maxEventBytes)")
        case .queued(let figure): queued = figure
        }
        // Past a limit by more than the slack, the journal is drained into
        // the table and the oldest dropped now (stats and `queuedCount`
        // trim the slack before they answer).
        if queued.count > options.maxQueuedEvents + countSlack || queued.bytes > options.maxQueuedBytes + byteSlack {
            try drainIntoTable()
        }
        // After a failed upload the timer brings the next attempt: waking
        // the uploader on every event would only cost the tracking thread.
        if queued.count >= options.batchThreshold && !uploadsFailing.load(ordering: .relaxed) { wakeUploader() }
        return true
    }

    private enum TrackOutcome {
        case queued((count: Int, bytes: Int))
        case notAllowed
        case closed
        case tooLarge(Int)
    }

    /// The figures past which `track` acts: the flush threshold (wake the
    /// uploader) and the limits with their slack (drain and trim). After a
    /// failed upload `track` does not wake the uploader (the timer brings
    /// the next attempt), so only the limits count: an offline queue above
    /// the threshold is then not counted exactly on every event, which
    /// would make every tracking thread write the shared totals.
    private var nearThresholds: (count: Int, bytes: Int) {
        let limit = options.maxQueuedEvents + countSlack + 1
        let count = uploadsFailing.load(ordering: .relaxed) ? limit : min(options.batchThreshold, limit)
        return (count, options.maxQueuedBytes + byteSlack + 1)
    }

    /// How far `track` lets the journal run past the limits before it
    /// drains and trims on the calling thread: at the limit (offline, the
    /// queue full), one drain per event would cost more than the journal
    /// saves; one per 1 % of the limit costs little.
    private var countSlack: Int { max(0, min(100, options.maxQueuedEvents / 100)) }
    private var byteSlack: Int { options.maxQueuedBytes / 100 }

    /// Drains and trims when the queue is past a limit, so that what the
    /// host reads holds the limits exactly.
    private func trimToLimits() {
        let queued = store.queued
        if queued.count > options.maxQueuedEvents || queued.bytes > options.maxQueuedBytes { _ = try? drainIntoTable() }
    }

    /// Moves journaled events into SQLite (`part`: at most that many, the
    /// oldest; see `EventStore.drainPart`), then drops the oldest past the
    /// limits (counted as `queue_limit`).
    private func drainIntoTable(replacingFiles: Bool = true, part: Int? = nil) throws(AppNorthError) {
        let limits = (options.maxQueuedEvents, options.maxQueuedBytes)
        // Counted by the store (`limitDropped`), under its drain lock.
        let dropped: Int
        if let part {
            dropped = try store.drainPart(part, trimmingTo: limits)
        } else {
            dropped = try store.drain(trimmingTo: limits, replacingFiles: replacingFiles)
        }
        if dropped > 0 { logger.log(.warning, "event queue over its limits: dropped the \(dropped) oldest event(s)") }
    }

    /// How many journaled events the upload cycle imports at a time: a
    /// part costs less than a request's wait (about 1 ms here, against
    /// 5 ms or more for a request), and holds at least two batches, so the
    /// table always holds the next batch to read ahead.
    static func drainPart(_ batchSize: Int) -> Int { max(256, batchSize.multipliedSaturating(by: 2)) }

    // MARK: Flushing

    /// Asks the upload thread to upload everything now and waits up to
    /// `timeoutMilliseconds` for it. Returns how many events the server
    /// accepted meanwhile. Throws the cycle's error (network, server...),
    /// `.wrongState` while uploads are paused by the circuit breaker, or
    /// `.timeout` (`deliveredCount` tells what went out before a failure),
    /// or `.cancelled` when the client's `cancelInFlight()` ends the wait
    /// (the events stay queued).
    @discardableResult
    public func flush(timeoutMilliseconds: Int) throws(AppNorthError) -> Int {
        let start = state.withLock { s -> (target: UInt64, delivered: Int)? in
            guard !s.closed else { return nil }
            s.flushRequested += 1
            return (s.flushRequested, s.delivered)
        }
        guard let start else { throw .wrongState("the event queue is closed") }
        let cancel = WaitCancellation(client.transport)
        wakeUploader()
        let finished = waitForFlush(start.target, timeoutMilliseconds, cancel)
        let outcome = state.withLock { ($0.breaker.isOpen, $0.cycleError, $0.delivered &- start.delivered) }
        guard finished else {
            if let error = cancel.error { throw error }
            throw .timeout("flush did not finish within \(timeoutMilliseconds) ms; events stay queued")
        }
        if outcome.0 { throw Self.pausedError }
        if let error = outcome.1 { throw error }
        return max(0, outcome.2)
    }

    /// Waits for the flush cycle `target` in short slices of real time, so
    /// that a cancel (`WaitCancellation`) ends the wait at once. False on
    /// timeout or cancel.
    private func waitForFlush(_ target: UInt64, _ timeoutMilliseconds: Int, _ cancel: WaitCancellation) -> Bool {
        var remaining = max(0, timeoutMilliseconds)
        while true {
            let slice = min(20, remaining)
            if flushDone.wait(for: target, milliseconds: slice) { return true }
            remaining -= slice
            if remaining <= 0 || cancel.isCancelled { return false }
        }
    }

    static let pausedError = AppNorthError.wrongState(
        "uploads are paused after consecutive failures; call start_session or foreground to resume")

    /// Flushes within `timeoutMilliseconds` (0: no flush), then stops the
    /// upload thread. Queued events stay on disk. Later calls fail with
    /// `.wrongState`. Idempotent.
    public func close(timeoutMilliseconds: Int) {
        if timeoutMilliseconds > 0 { _ = try? flush(timeoutMilliseconds: timeoutMilliseconds) }
        state.withLock {
            $0.closed = true
            closedFlag.store(true, ordering: .releasing)
        }
        shutdown.cancel()
        state.withLock { $0.inFlight?.cancel() }
        worker.withLock { $0 }?.stop()
        // Journaled events move to SQLite now, not at the next open.
        _ = try? drainIntoTable(replacingFiles: false)
    }

    // MARK: Sessions and network

    /// A new app session: a new session id, and uploads resume if the
    /// circuit breaker had paused them.
    public func startSession() throws(AppNorthError) {
        var wasOpen = false
        try whileOpen {
            $0.sessionID = Random.hexToken(bytes: 16)
            $0.eventTail = eventTail(sessionID: $0.sessionID)
            tailGeneration.add(1, ordering: .releasing)
            wasOpen = $0.breaker.isOpen
            $0.breaker.reset()
        }
        if wasOpen { logger.log(.info, "events: circuit breaker closed by a new session; uploads resume") }
        wakeUploader()
    }

    /// The app came to the foreground: uploads resume and a flush starts.
    public func foreground() throws(AppNorthError) {
        var wasOpen = false
        try whileOpen {
            wasOpen = $0.breaker.isOpen
            $0.breaker.reset()
            $0.flushRequested += 1
        }
        if wasOpen { logger.log(.info, "events: circuit breaker closed by foreground; uploads resume") }
        wakeUploader()
    }

    public func setNetworkType(_ type: NetworkType) throws(AppNorthError) {
        try whileOpen { $0.networkType = type }
    }

    /// Changes state unless the queue is closed.
    private func whileOpen(_ change: (inout State) -> Void) throws(AppNorthError) {
        let open = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            change(&s)
            return true
        }
        if !open { throw .wrongState("the event queue is closed") }
    }

    // MARK: Consent

    public var consent: ConsentState {
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
    public func setConsent(analytics granted: Bool) throws(AppNorthError) {
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
                if purged > 0 { state.withLock { $0.dropped["consent", default: 0] += purged } }
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
    private func refreshConsent() {
        if consentWatch.hasChanged { adoptSharedConsent() }
    }

    /// Adopts the stored choice after another handle changed it. A failure
    /// is logged and retried at the next check; meanwhile nothing this
    /// handle journals can be uploaded if the change was a revocation
    /// (its journal's epoch is older than the stored count).
    private func adoptSharedConsent() {
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
    private func adoptLocked() throws(AppNorthError) {
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
            if purged > 0 { state.withLock { $0.dropped["consent", default: 0] += purged } }
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
    private func apply(_ value: ConsentState, to s: inout State) {
        s.consent = value
        trackingAllowed.store(s.allowsTracking(requireConsent: options.requireConsent), ordering: .sequentiallyConsistent)
    }

    /// The stored choice and revocation count. A damaged choice row is
    /// deleted and logged, and the choice is unknown again: the host asks
    /// the user anew.
    private static func loadConsent(_ db: SQLiteStore, logger: Logger) throws(AppNorthError)
        -> (choice: ConsentState, epoch: Int64) {
        let (choice, epoch) = try db.withConnection { conn throws(AppNorthError) in
            (try ConsentRecord.choice(conn), try ConsentRecord.revocations(conn))
        }
        guard choice == .unknown else { return (choice ?? .unknown, epoch) }
        try db.kvDelete(namespace: ConsentRecord.namespace, key: ConsentRecord.choiceKey)
        logger.log(.warning, "event queue: dropped a damaged consent row; consent is unknown again")
        return (.unknown, epoch)
    }

    // MARK: Identity

    public var anonymousID: String { identity.anonymousID }
    public var userID: String? { identity.userID }

    public func identify(userID: String) throws(AppNorthError) {
        guard (1...256).contains(userID.utf8.count) else { throw .invalidArgument("user id must be 1 to 256 bytes") }
        try whileOpen { _ in }
        try identity.identify(userID)
        refreshEventTail()
    }

    /// Clears the user id (logout). The anonymous id stays.
    public func reset() throws(AppNorthError) {
        try whileOpen { _ in }
        try identity.identify(nil)
        refreshEventTail()
    }

    /// Rebuilds the events' identity tail from the identity now held. The
    /// identity is read under the state lock, so that of two racing
    /// identify calls the later rebuild sees the later value.
    private func refreshEventTail() {
        state.withLock {
            $0.eventTail = eventTail(sessionID: $0.sessionID)
            tailGeneration.add(1, ordering: .releasing)
        }
    }

    private func eventTail(sessionID: String) -> [UInt8] {
        let who = identity.both
        return EventPayload.identityTail(anonymousID: who.anonymousID, userID: who.userID, sessionID: sessionID)
    }

    public func setPushToken(_ token: String?) throws(AppNorthError) {
        if let token, !(1...4096).contains(token.utf8.count) { throw .invalidArgument("push token must be 1 to 4096 bytes") }
        try whileOpen { _ in }
        try identity.setPushToken(token)
    }

    public func pushToken() throws(AppNorthError) -> String? { try identity.pushToken() }

    // MARK: Stats

    /// Queued count and bytes, drops by reason, breaker state, last error,
    /// last flush time, as a JSON object.
    public func statsJSON() -> String {
        refreshConsent()
        trimToLimits()
        let s = state.withLock { $0 }
        let root = JSON.object()
        let queued = store.settledQueued
        root.set("queued", .int(Int64(queued.count)))
        root.set("queued_bytes", .int(Int64(queued.bytes)))
        let dropped = JSON.object()
        for reason in ["queue_limit", "client_error", "payload_too_large", "consent"] {
            // Events purged at import count as consent drops too, and drops
            // past the limits are counted by the store (EventStore).
            let purged = reason == "consent" ? store.consentDropped.load(ordering: .relaxed)
                : reason == "queue_limit" ? store.limitDropped.load(ordering: .relaxed) : 0
            dropped.set(reason, .int(Int64(s.dropped[reason, default: 0] + purged)))
        }
        // Damaged journal stretches and table rows found and skipped.
        dropped.set("damaged", .int(Int64(store.damagedDropped.load(ordering: .relaxed))))
        root.set("dropped", dropped)
        let breaker = JSON.object()
        breaker.set("open", .bool(s.breaker.isOpen))
        breaker.set("consecutive_failures", .int(Int64(s.breaker.consecutiveFailures)))
        breaker.set("threshold", .int(Int64(s.breaker.threshold)))
        root.set("breaker", breaker)
        if let error = s.lastError {
            let e = JSON.object()
            e.set("message", .string(error.message))
            e.set("http_status", .int(Int64(error.httpStatus)))
            root.set("last_error", e)
        } else {
            root.set("last_error", .null())
        }
        root.set("last_flush_ms", s.lastFlushMs.map { .int($0) } ?? .null())
        root.set("last_attempt_ms", s.lastAttemptMs.map { .int($0) } ?? .null())
        root.set("network_type", .string(s.networkType.name))
        root.set("batch_size", .int(Int64(s.networkType.batchSize)))
        root.set("consent", .string(s.consent.name))
        return root.serialized()
    }

    public var queuedCount: Int {
        refreshConsent()
        trimToLimits()
        return store.settledQueued.count
    }

    /// Events the server has accepted since this queue was opened.
    public var deliveredCount: Int { state.withLock { $0.delivered } }

    // MARK: - The upload thread

    private func wakeUploader() {
        worker.withLock { $0 }?.wake()
    }

    /// The upload thread's timers (flush interval, retry delays,
    /// Retry-After) run on the handle's clock: real monotonic time by
    /// default. An injected clock cannot wake the thread when it moves, so
    /// the thread then looks at it at least every 50 ms.
    private func ticks() -> UInt64 { clock.monotonicNanoseconds() }
    private var longestSleepMs: Int { clock is SystemClock ? Int.max : 50 }

    /// What the upload thread remembers between steps.
    struct UploaderMemory {
        var lastCycleMono: UInt64
        var lastCycleFailed = false
        var completed: UInt64 = 0
    }

    /// One turn of the upload thread: runs a cycle when one is due and
    /// returns 0, or returns how long to sleep before the next turn.
    private func uploaderStep(_ thread: BackgroundThread, _ memory: inout UploaderMemory) -> Int {
        let requested = state.withLock { $0.flushRequested }
        let elapsedMs = Int((ticks() &- memory.lastCycleMono) / 1_000_000)
        let thresholdReached = store.count >= options.batchThreshold && !memory.lastCycleFailed
        guard requested > memory.completed || thresholdReached || elapsedMs >= options.flushIntervalMilliseconds else {
            return max(1, min(longestSleepMs, options.flushIntervalMilliseconds - elapsedMs))
        }
        memory.lastCycleFailed = !uploadCycle(thread)
        uploadsFailing.store(memory.lastCycleFailed, ordering: .relaxed)
        memory.lastCycleMono = ticks()
        memory.completed = requested
        flushDone.advance(to: requested)
        return 0
    }

    /// How one batch's upload ended.
    enum BatchOutcome {
        case delivered
        /// Kept for the next cycle (5xx, network), or discarded (4xx).
        case failed(AppNorthError)
        /// Consent was revoked or the queue is closing: the batch is left
        /// alone (a revocation has purged it).
        case abandoned
    }

    /// Uploads batches until the queue is empty or one fails. Returns true
    /// when nothing failed. A failed cycle (a batch's first attempt and its
    /// retries, or a discarded batch) counts as one failure toward the
    /// circuit breaker: the seed counts failed flushes, not requests.
    ///
    /// Batches go one after another, and the work between two of them
    /// overlaps the server's: while a batch's request is in flight, the
    /// thread deletes the batch delivered before it and reads, checks and
    /// encodes the next one (`PreparedBatch`), which goes out as soon as
    /// the answer is in, if nothing it was read under has changed.
    private func uploadCycle(_ thread: BackgroundThread) -> Bool {
        state.withLock { $0.cycleError = nil }
        /// The batch read while the previous one was in flight.
        var ahead: PreparedBatch?
        /// A delivered batch whose rows are deleted while the next is in
        /// flight (a crash before that resends it; the server deduplicates).
        var undeleted: [StoredEvent] = []
        func deleteDelivered() {
            guard !undeleted.isEmpty else { return }
            _ = try? store.remove(undeleted)
            undeleted = []
        }
        defer { deleteDelivered() }
        while !thread.isStopping {
            refreshConsent()
            let (allowed, batchSize, generation) = state.withLock { s in
                (!s.breaker.isOpen && s.allowsTracking(requireConsent: options.requireConsent),
                 s.networkType.batchSize, s.consentGeneration)
            }
            guard allowed else { return state.withLock { !$0.breaker.isOpen } }
            let batch: PreparedBatch
            let part = Self.drainPart(batchSize)
            do {
                try store.recoverOrphansIfDue()
                // A short batch read ahead may have missed rows drained since.
                if let next = ahead, next.generation == generation, next.events.count == batchSize,
                   next.removals == store.removals.load(ordering: .acquiring) {
                    batch = next
                } else {
                    // Only the journal's oldest part before this batch: the
                    // rest goes in while the requests are in flight.
                    try drainIntoTable(part: part)
                    deleteDelivered()
                    batch = try prepareBatch(batchSize, after: nil, generation)
                }
                ahead = nil
            } catch {
                record(error)
                state.withLock { $0.cycleError = error }
                return false
            }
            if batch.events.isEmpty {
                // A part can hold only ids already queued: the next one then.
                if store.hasRetiredRest { continue }
                return true
            }
            let outcome = upload(batch.events, generation, thread, body: batch.body,
                                 deferRemoval: { delivered in
                // The batch before, if its request's wait did not delete it.
                deleteDelivered()
                undeleted = delivered
            }, whileWaiting: {
                deleteDelivered()
                // The journal's next part, while the server works (a failure
                // is met again, and reported, before the next batch).
                if self.store.hasRetiredRest { try? self.drainIntoTable(part: part) }
                ahead = try? self.prepareBatch(batchSize, after: batch.events.last?.seq, generation)
            })
            switch outcome {
            case .delivered:
                continue
            case .abandoned:
                // A revocation by another handle is acted on now, not at the next track.
                refreshConsent()
                return true
            case .failed(let error):
                let opened = state.withLock { s -> Bool in
                    let wasOpen = s.breaker.isOpen
                    s.breaker.recordFailure()
                    s.cycleError = error
                    return !wasOpen && s.breaker.isOpen
                }
                if opened {
                    logger.log(.warning, "events: circuit breaker open after \(options.breakerThreshold) failed flushes; "
                               + "uploads paused until start_session or foreground")
                }
                return false
            }
        }
        return true
    }

    /// Sends one batch with the retry schedule. Every attempt first checks,
    /// under the state lock, that consent has not been revoked since the
    /// batch was read (`generation`), and registers its request so that a
    /// revocation cancels it.
    ///
    /// `body`: the batch's body, when prepared ahead. `deferRemoval`: takes
    /// the delivered rows instead of deleting them now. `whileWaiting`: runs
    /// once the first attempt's request is out (`HTTPTransport.perform`).
    private func upload(_ batch: [StoredEvent], _ generation: UInt64, _ thread: BackgroundThread,
                        body: BatchBody? = nil, deferRemoval: (([StoredEvent]) -> Void)? = nil,
                        whileWaiting: (() -> Void)? = nil) -> BatchOutcome {
        var batch = batch
        var body = body ?? BatchBody(batch, client.compression)
        var whileWaiting = whileWaiting
        var retry = 0
        while true {
            guard waitForRetryAfter(generation, thread) else { return .abandoned }
            // The fence keeps a revocation in another handle from returning
            // while this attempt, checked before it, is still in progress.
            let attempt = consentWatch.withUploadFence { () -> (Int?, HTTPResponse?, AppNorthError?)? in
                guard let cancel = beginAttempt(generation) else { return nil }
                return send(body, cancel: cancel, whileWaiting: whileWaiting)
            }
            whileWaiting = nil
            guard let (status, response, error) = attempt else { return .abandoned }
            // Another handle's revocation during the attempt is adopted now:
            // the batch is then left alone (that revocation purged it).
            refreshConsent()
            let revoked = state.withLock { s -> Bool in
                s.inFlight = nil
                s.lastAttemptMs = clock.wallMilliseconds()
                return s.consentGeneration != generation
            }
            // Whatever came back, a revocation has purged these events.
            if revoked || thread.isStopping { return .abandoned }
            switch UploadStatusPolicy.outcome(for: status) {
            case .delivered:
                if let deferRemoval { deferRemoval(batch) } else { _ = try? store.remove(batch) }
                let failuresBefore = state.withLock { s -> Int in
                    let before = s.breaker.consecutiveFailures
                    s.delivered &+= batch.count
                    s.breaker.recordSuccess()
                    s.lastFlushMs = clock.wallMilliseconds()
                    return before
                }
                logger.log(.debug, "events: batch of \(batch.count) delivered (HTTP \(status ?? 0))")
                if failuresBefore > 0 { logger.log(.info, "events: uploads work again after \(failuresBefore) failure(s)") }
                return .delivered
            case .discard:
                let error = error ?? .http("HTTP \(status ?? 0)", httpStatus: status ?? 0)
                record(error)
                if let rest = dropRejected(batch, response), !rest.isEmpty {
                    // Only the listed events were refused: the rest goes at once.
                    batch = rest
                    body = BatchBody(rest, client.compression)
                    continue
                }
                let gone = (try? store.remove(batch)) ?? 0
                state.withLock { $0.dropped["client_error", default: 0] += gone }
                logger.log(.error, "event batch of \(batch.count) discarded after HTTP \(status ?? 0): check the event schema")
                return .failed(error)
            case .split:
                if batch.count == 1 {
                    let gone = (try? store.remove(batch)) ?? 0
                    state.withLock { $0.dropped["payload_too_large", default: 0] += gone }
                    logger.log(.warning, "an event was too large for the server (HTTP 413) and was dropped")
                    return .delivered
                }
                let half = batch.count / 2
                let first = upload(Array(batch[..<half]), generation, thread)
                guard case .delivered = first else { return first }
                return upload(Array(batch[half...]), generation, thread)
            case .retry:
                if let response, let wait = RetryAfter.milliseconds(for: response, nowWallMs: clock.wallMilliseconds(),
                                                                       capMs: options.retryAfterCapMilliseconds) {
                    let until = ticks().addingSaturating(UInt64(clamping: wait).multipliedSaturating(by: 1_000_000))
                    state.withLock { $0.notBeforeMono = until }
                }
                let failure = error ?? .network("no response")
                record(failure)
                retry += 1
                guard let delay = options.retry.delay(retry: retry, unit: Random.unit()) else {
                    logger.log(.debug, "events: batch of \(batch.count) kept for the next cycle after \(retry) attempt(s)")
                    return .failed(failure)
                }
                logger.log(.debug, "events: batch of \(batch.count) failed; retry \(retry) in \(delay) ms")
                if !pause(milliseconds: delay, generation, thread) { return .abandoned }
            }
        }
    }

    /// Registers the next attempt's request, unless consent was revoked
    /// since `generation`, here or by another handle (adopted or not), or
    /// the queue is closing.
    private func beginAttempt(_ generation: UInt64) -> StreamCancellation? {
        state.withLock { s -> StreamCancellation? in
            guard s.consentGeneration == generation, s.revocationsAdopted == consentWatch.revocations,
                  !s.closed, !shutdown.isCancelled else { return nil }
            let cancel = StreamCancellation()
            s.inFlight = cancel
            return cancel
        }
    }

    /// After a 400 or 422 that lists rejected event ids (docs/protocol.md):
    /// drops those events, counts them as `client_error`, and returns the
    /// rest of the batch. Nil when the answer lists none of the batch's
    /// events: then the whole batch is refused, as the seed says.
    private func dropRejected(_ batch: [StoredEvent], _ response: HTTPResponse?) -> [StoredEvent]? {
        guard let response, response.status == 400 || response.status == 422,
              let listed = RejectedEvents.ids(in: response.body) else { return nil }
        let rejected = batch.filter { listed.contains($0.id) }
        guard !rejected.isEmpty else { return nil }
        let gone = (try? store.remove(ids: rejected.map(\.id))) ?? 0
        state.withLock { $0.dropped["client_error", default: 0] += gone }
        logger.log(.error, "the server rejected \(rejected.count) of \(batch.count) events (HTTP \(response.status)): "
                   + "dropped them, sending the rest; check the event schema")
        return batch.filter { !listed.contains($0.id) }
    }

    /// Reads the oldest `limit` events (after `after`) and encodes them,
    /// noting what they were read under.
    private func prepareBatch(_ limit: Int, after: Int64?, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        // Noted before the read: a removal during it shows as a change.
        let removals = store.removals.load(ordering: .acquiring)
        let events = try store.oldest(limit, after: after)
        return PreparedBatch(events: events, body: BatchBody(events, client.compression), generation: generation,
                             removals: removals)
    }

    /// One POST of a batch.
    private func send(_ body: BatchBody, cancel: StreamCancellation,
                      whileWaiting: (() -> Void)?) -> (Int?, HTTPResponse?, AppNorthError?) {
        var headers = client.standardHeaders()
        headers.append(("Content-Type", "application/json"))
        let request = HTTPRequest(method: .post, url: client.url("/events"), headers: headers, body: body.plain)
        do {
            let response = try client.upload(request, as: .eventBatch, packed: body.packed, cancel: cancel,
                                             whileWaiting: whileWaiting)
            if response.isSuccess { return (response.status, response, nil) }
            return (response.status, response,
                    AppNorthError.fromHTTP(status: response.status, message: AppNorthClient.serverMessage(response)))
        } catch {
            return (nil, nil, error)
        }
    }

    private func record(_ error: AppNorthError) {
        state.withLock { $0.lastError = error }
        logger.log(.warning, "event upload failed: \(error.message)")
    }

    /// Waits out a server's Retry-After. Returns false when the thread is
    /// stopping or consent was revoked meanwhile.
    private func waitForRetryAfter(_ generation: UInt64, _ thread: BackgroundThread) -> Bool {
        let until = state.withLock { $0.notBeforeMono }
        let now = ticks()
        return until <= now || pause(milliseconds: Int((until - now) / 1_000_000), generation, thread)
    }

    /// Sleeps a retry delay. Wake-ups from `track` do not cut it short;
    /// stopping and a revocation of consent do (returns false).
    private func pause(milliseconds: Int, _ generation: UInt64, _ thread: BackgroundThread) -> Bool {
        let deadline = ticks().addingSaturating(UInt64(clamping: milliseconds).multipliedSaturating(by: 1_000_000))
        while !thread.isStopping {
            refreshConsent()
            guard state.withLock({ $0.consentGeneration == generation }) else { break }
            let now = ticks()
            if now >= deadline { return true }
            sleepMilliseconds(min(50, Int((deadline - now) / 1_000_000) + 1))
        }
        return false
    }
}
