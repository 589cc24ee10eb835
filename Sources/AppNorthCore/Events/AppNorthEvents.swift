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
package final class AppNorthEvents: Sendable {
    package let options: AppNorthEventsOptions
    package let client: AppNorthClient
    /// Internal (not private) for tests that read the journal's counters.
    let store: EventStore
    let db: SQLiteStore
    /// The identity, the session and the tail every event carries.
    let sender: EventSender
    var identity: Identity { sender.identity }
    let clock: any AppNorthClock
    let logger: Logger
    /// Drops by reason and deliveries since open (their own lock).
    let counters: EventCounters
    /// Open or closed: the one place it is held.
    let lifecycle: EventsLifecycle
    /// The consent choice, its adoption across handles, and the upload
    /// request a revocation cancels (its own lock).
    let consentOwner: EventConsent
    /// The upload thread, its breaker, flushes and errors (its own lock).
    let uploader: EventUploader
    /// Journaled events into the table, under the limits.
    let drain: QueueDrain
    /// The track gate: the host's text into the journal.
    let tracker: EventTracker
    /// The settings `track` and the uploader run by: the options, and the
    /// client's `appnorth.events` config key (its own lock and gate word).
    let settings: EventSettingsOwner
    /// This handle's place in the client's feed of that key; nil when the
    /// options opt out.
    let followToken: Int?

    /// Opens the queue in `directory` and starts the upload thread.
    /// `secureStore` holds identity values (default: a 0600 file there).
    package init(client: AppNorthClient, directory: DataDirectory, options: AppNorthEventsOptions = AppNorthEventsOptions(),
                secureStore: (any AppNorthSecureStore)? = nil, clock: any AppNorthClock = SystemClock(),
                logger: Logger? = nil) throws(AppNorthError) {
        try options.validate()
        self.options = options
        self.client = client
        self.clock = clock
        let logger = logger ?? client.configuration.logger
        self.logger = logger
        let counters = EventCounters(), lifecycle = EventsLifecycle()
        self.counters = counters
        self.lifecycle = lifecycle
        db = try SQLiteStore(directory: directory)
        // The watch first: a change made after its counters are read is
        // adopted later; one made before is in the stored choice read next.
        let watch = try ConsentWatch(directory: directory)
        let revocationsAdopted = watch.revocations
        let stored = try EventConsent.load(db, logger: logger)
        store = try EventStore(db: db, directory: directory, epoch: stored.epoch, logger: logger,
                               largestJournal: EventJournal.largestFile(maxEvents: options.maxQueuedEvents,
                                                                        maxBytes: options.maxQueuedBytes))
        consentOwner = EventConsent(watch: watch, stored: stored.choice, revocationsAdopted: revocationsAdopted,
                                    requireConsent: options.requireConsent, db: db, store: store, counters: counters,
                                    lifecycle: lifecycle, clock: clock, logger: logger)
        let secrets: any AppNorthSecureStore
        if let secureStore { secrets = secureStore } else { secrets = try FileSecureStore(directory: directory) }
        sender = EventSender(identity: try Identity(store: secrets, clock: clock, logger: logger), policy: options.session,
                             nowMs: clock.wallMilliseconds(),
                             superFile: SuperPropertiesFile(directory: directory, watch: watch,
                                                            maxEventBytes: options.maxEventBytes, logger: logger))
        settings = EventSettingsOwner(local: EventSettings(options: options), anonymousID: sender.identity.anonymousID,
                                      logger: logger)
        // The rows get the byte limit less the files' other needs (FileBudget).
        drain = QueueDrain(store: store, limits: (options.maxQueuedEvents, FileBudget.rowBytes(options.maxQueuedBytes)),
                           logger: logger)
        uploader = EventUploader(options: options, client: client, store: store, consent: consentOwner,
                                 counters: counters, lifecycle: lifecycle, drain: drain, settings: settings, clock: clock,
                                 logger: logger)
        tracker = EventTracker(store: store, options: options, consent: consentOwner, sender: sender, lifecycle: lifecycle,
                               counters: counters, uploader: uploader, drain: drain, settings: settings, clock: clock,
                               beforeSend: options.beforeSend.map {
                                   BeforeSendFilter(hook: $0, maxEventBytes: options.maxEventBytes, counters: counters, logger: logger)
                               })
        // Before the upload thread starts: a config opened first (offline,
        // on its cached tier) has switched the handle before anything goes.
        followToken = options.followsRemoteSettings ? client.eventSettings.follow(settings) : nil
        settings.onChange { [weak uploader] in uploader?.wake() }
        try uploader.start(opened: clock.monotonicNanoseconds())
    }

    deinit {
        lifecycle.close()
        uploader.stop()
        if let followToken { client.eventSettings.unfollow(followToken) }
    }

    // MARK: Flushing

    /// Asks the upload thread to upload everything now and waits up to
    /// `timeoutMilliseconds` for it. Returns how many events the server
    /// accepted meanwhile. Throws the cycle's error (network, server...),
    /// `.wrongState` while uploads are paused by the circuit breaker, or
    /// `.timeout` (`deliveredCount` tells what went out before a failure),
    /// or `.cancelled` when the client's `cancelInFlight()` ends the wait
    /// (the events stay queued).
    @discardableResult
    package func flush(timeoutMilliseconds: Int) throws(AppNorthError) -> Int {
        let ticket = try requestFlush()
        let cancel = Cancellation(operation: OperationScope.current, transport: client.transport)
        guard waitForFlush(ticket.target, timeoutMilliseconds, cancel) else {
            if let reason = cancel.reason { throw Self.cancelledError(reason) }
            throw Self.timeoutError(timeoutMilliseconds)
        }
        return try flushOutcome(ticket)
    }

    /// `flush` without blocking: returns at once; `completion` runs once, on
    /// the transfer engine's thread (no thread waits meanwhile), with nil
    /// or the error `flush` would throw. `operation` cancels it.
    package func startFlush(timeoutMilliseconds: Int, operation: CancellationToken,
                            completion: @escaping @Sendable (AppNorthError?) -> Void) throws(AppNorthError) {
        let ticket = try requestFlush()
        let cancellation = Cancellation(operation: operation, transport: client.transport)
        let wait = try AsyncWait.watch(timeoutMilliseconds: timeoutMilliseconds, cancellation: cancellation) { [weak self] how in
            // Weak: the upload thread's list of waiters must not keep a
            // handle alive; a handle freed meanwhile ended the wait first.
            switch how {
            case .reached:
                guard let self else { return completion(.wrongState("the event queue is closed")) }
                do throws(AppNorthError) { _ = try self.flushOutcome(ticket); completion(nil) } catch { completion(error) }
            case .timedOut: completion(Self.timeoutError(timeoutMilliseconds))
            case .cancelled(let reason): completion(Self.cancelledError(reason))
            }
        }
        uploader.flushDone.whenReached(ticket.target) { wait.reach() }
    }

    private func requestFlush() throws(AppNorthError) -> EventUploader.FlushTicket {
        guard let ticket = uploader.requestFlush() else { throw .wrongState("the event queue is closed") }
        return ticket
    }

    private func flushOutcome(_ ticket: EventUploader.FlushTicket) throws(AppNorthError) -> Int {
        try uploader.flushOutcome(ticket)
    }

    private static func timeoutError(_ timeoutMilliseconds: Int) -> AppNorthError {
        .timeout("flush did not finish within \(timeoutMilliseconds) ms; events stay queued")
    }

    private static func cancelledError(_ reason: Cancellation.Reason) -> AppNorthError {
        switch reason {
        case .operation: .cancelled("flush cancelled (its operation was cancelled); events stay queued")
        case .client: .cancelled("flush cancelled by appnorth_client_cancel; events stay queued")
        case .stopped: .cancelled("flush cancelled: the transfer thread stopped (its last handle was freed, or appnorth_shutdown); events stay queued")
        }
    }

    /// Waits for the flush cycle `target` in short slices of real time, so
    /// that a cancel (`cancel`: this thread's operation, the client's
    /// `cancelInFlight()` since the flush began) ends the wait at once.
    /// False on timeout or cancel.
    func waitForFlush(_ target: UInt64, _ timeoutMilliseconds: Int, _ cancel: Cancellation) -> Bool {
        var remaining = max(0, timeoutMilliseconds)
        while true {
            let slice = min(20, remaining)
            if uploader.flushDone.wait(for: target, milliseconds: slice) { return true }
            remaining -= slice
            if remaining <= 0 || cancel.isCancelled { return false }
        }
    }

    /// Asks the queue to end without waiting for anything (a process-wide
    /// stop, which then waits for every thread at once): later calls fail
    /// with `.wrongState` and the upload in flight is cancelled; the upload
    /// thread ends when told to stop (`LibraryThreads`). Queued events stay
    /// on disk, journaled ones for the next open to import.
    package func requestStop() {
        lifecycle.close()
        consentOwner.cancelInFlight()
    }

    /// Flushes within `timeoutMilliseconds` (0: no flush), then stops the
    /// upload thread. Queued events stay on disk. Later calls fail with
    /// `.wrongState`. Idempotent.
    package func close(timeoutMilliseconds: Int) {
        if timeoutMilliseconds > 0 { _ = try? flush(timeoutMilliseconds: timeoutMilliseconds) }
        lifecycle.close()
        consentOwner.cancelInFlight()
        uploader.stop()
        if let followToken { client.eventSettings.unfollow(followToken) }
        // Journaled events move to SQLite now, not at the next open.
        _ = try? drain.run(replacingFiles: false)
        if store.count == 0 { drain.compact() }
    }

    // MARK: Sessions and network

    /// A new app session: a new session id, and uploads resume if the
    /// circuit breaker had paused them. The automatic rotation's idle gap
    /// and maximum length count from now.
    package func startSession() throws(AppNorthError) {
        guard uploader.resume("a new session", flush: false) else { throw .wrongState("the event queue is closed") }
        sender.newSession(nowMs: clock.wallMilliseconds())
    }

    /// The session id the next event carries, unless it starts a new
    /// session (`SessionPolicy`: the rotation happens when an event is made).
    package var sessionID: String {
        get throws(AppNorthError) {
            try requireOpen()
            return sender.sessionID
        }
    }

    /// The app came to the foreground: uploads resume and a flush starts.
    package func foreground() throws(AppNorthError) {
        guard uploader.resume("foreground", flush: true) else { throw .wrongState("the event queue is closed") }
    }

    package func setNetworkType(_ type: NetworkType) throws(AppNorthError) {
        guard uploader.whileOpen({ $0.networkType = type }) else { throw .wrongState("the event queue is closed") }
    }

    /// Throws unless the queue is open.
    func requireOpen() throws(AppNorthError) {
        if lifecycle.isClosed { throw .wrongState("the event queue is closed") }
    }
}
