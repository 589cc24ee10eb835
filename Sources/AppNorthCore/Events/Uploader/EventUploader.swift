import Synchronization

/// The uploader: the library thread that moves journaled events into the
/// table and uploads them, and what it decides by (`UploaderState`: the
/// circuit breaker, the flushes asked for, the network type, the last
/// errors, a server's Retry-After). The thread's turns are `UploadTrigger`
/// (when a cycle starts) and `UploadLoop` (the cycle: batches until empty
/// or failed, each one a `BatchUpload`), which does everything outside
/// itself through one `UploadWorld` (`StoreUploadWorld` here; tests give
/// their own).
///
/// The thread holds the uploader only while it works, never while it
/// sleeps: the queue's `close` or deinit stops it (`stop`).
final class EventUploader: Sendable {
    let state: UploaderState
    let options: AppNorthEventsOptions
    let client: AppNorthClient
    let store: EventStore
    let consent: EventConsent
    let counters: EventCounters
    let lifecycle: EventsLifecycle
    let drain: QueueDrain
    /// Where the thread reads the flush interval, the threshold and
    /// whether uploads are switched off, at every turn.
    let settings: EventSettingsOwner
    let clock: any AppNorthClock
    let logger: Logger
    /// Moves when a cycle ends (`flush` waits on it).
    let flushDone = GenerationWaiter()
    let worker: Lock<BackgroundThread?> = Lock(nil, level: LockClass.eventsWorker)
    /// The queued count at which `track` wakes the uploader (the thread
    /// sets it: the threshold, 20 more than a failed cycle left, or Int.max
    /// while it has no use for a wake-up).
    let wakeAt = Atomic<Int>(Int.max)

    init(options: AppNorthEventsOptions, client: AppNorthClient, store: EventStore, consent: EventConsent,
         counters: EventCounters, lifecycle: EventsLifecycle, drain: QueueDrain, settings: EventSettingsOwner,
         clock: any AppNorthClock, logger: Logger) {
        state = UploaderState(networkType: options.networkType, breakerThreshold: options.breakerThreshold)
        self.options = options
        self.client = client
        self.store = store
        self.consent = consent
        self.counters = counters
        self.lifecycle = lifecycle
        self.drain = drain
        self.settings = settings
        self.clock = clock
        self.logger = logger
    }

    /// Starts the upload thread. Events an earlier run left on disk go out
    /// as soon as it starts, not after the first 30 s timer or the 20th new
    /// event. The flush interval counts from `opened`, not from whenever
    /// the thread first runs.
    func start(opened: UInt64) throws(AppNorthError) {
        let leftover = store.count
        if leftover > 0 {
            state.withLock { $0.flushRequested = 1 }
            logger.log(.debug, "events: \(leftover) event(s) left by an earlier run; uploading them now")
        }
        let initial = settings.current
        let threshold = initial.batchThreshold, interval = initial.flushIntervalMilliseconds
        wakeAt.store(threshold, ordering: .relaxed)
        let thread = try BackgroundThread(name: "appnorth-events") { [weak self] thread in
            var trigger = UploadTrigger(threshold: threshold, intervalMilliseconds: interval, openedAt: opened)
            while !thread.isStopping {
                guard let sleepMs = self?.step(thread, &trigger) else { break }
                if sleepMs > 0 { _ = thread.sleep(milliseconds: sleepMs) }
            }
            // Nobody waits in vain for a flush after the thread has stopped.
            self?.flushDone.advance(to: .max)
        }
        worker.withLock { $0 = thread }
    }

    /// Stops the thread (cancel the request in flight first: `EventConsent.cancelInFlight`).
    func stop() {
        worker.withLock { $0 }?.stop()
    }

    func wake() {
        worker.withLock { $0 }?.wake()
    }

    /// The thread's timers (flush interval, retry delays, Retry-After) run
    /// on the handle's clock: real monotonic time by default. An injected
    /// clock cannot wake the thread when it moves, so the thread then
    /// looks at it at least every 50 ms.
    func ticks() -> UInt64 { clock.monotonicNanoseconds() }
    var longestSleepMs: Int { clock is SystemClock ? Int.max : 50 }

    /// One turn of the thread: asks the trigger whether a cycle is due,
    /// runs it, and tells the trigger how it ended; the one place where the
    /// thread's state moves, logged at debug level. Returns how long to
    /// sleep before the next turn (0: at once).
    func step(_ thread: BackgroundThread, _ trigger: inout UploadTrigger) -> Int {
        let now = settings.current
        trigger.adopt(threshold: now.batchThreshold, intervalMilliseconds: now.flushIntervalMilliseconds)
        let (requested, breakerOpen) = state.withLock { ($0.flushRequested, $0.breaker.isOpen) }
        let seen = UploadTrigger.Inputs(now: ticks(), queued: store.count, flushRequested: requested,
                                        breakerOpen: breakerOpen)
        switch trigger.next(seen) {
        case .sleep(let milliseconds, let wake):
            wakeAt.store(wake, ordering: .relaxed)
            return max(1, min(longestSleepMs, milliseconds))
        case .runCycle(let target, let reason):
            wakeAt.store(Int.max, ordering: .relaxed)
            let result = cycle(thread)
            let (failures, retryAfter) = state.withLock { ($0.breaker.consecutiveFailures, $0.notBeforeMono) }
            let queued = store.count
            let wake = trigger.cycleEnded(result, at: ticks(), flushTarget: target, queued: queued, failures: failures,
                                          schedule: options.retry, retryAfterUntil: retryAfter)
            logger.log(.debug, "events: cycle (\(reason.rawValue)) ended \(result), \(queued) queued; "
                       + "the next starts at \(wake == Int.max ? "flush or timer" : String(wake) + " queued")")
            wakeAt.store(wake, ordering: .relaxed)
            flushDone.advance(to: target)
            // Space comes back once everything went (SQLiteStore.compact),
            // after the flush's waiters are released: it is housekeeping,
            // not part of the delivery they wait for (about 10 ms after
            // 10,000 events; `close` waits for it).
            if result == .succeeded && store.count == 0 { drain.compact() }
            return 0
        }
    }

    /// One upload cycle (`UploadLoop`) through this queue's world: the
    /// store, consent and the client's transport.
    func cycle(_ thread: BackgroundThread) -> UploadTrigger.CycleResult {
        let world = StoreUploadWorld(store: store, drain: drain, consent: consent, client: client, thread: thread,
                                     clock: clock, logger: logger, longestSleepMs: longestSleepMs)
        var loop = UploadLoop(world: world, state: state, counters: counters, logger: logger, clock: clock,
                              schedule: options.retry, retryAfterCapMilliseconds: options.retryAfterCapMilliseconds)
        loop.switchedOff = { [settings] in !settings.uploadsEnabled }
        return loop.cycle()
    }

    // MARK: What the host asks of it

    /// A flush asked for: the cycle that completes it, and the delivered
    /// count before it.
    struct FlushTicket: Sendable {
        let target: UInt64
        let delivered: Int
    }

    /// Asks for a cycle now; nil once closed.
    func requestFlush() -> FlushTicket? {
        let ticket = state.withLock { s -> FlushTicket? in
            guard !lifecycle.isClosed else { return nil }
            s.flushRequested += 1
            return FlushTicket(target: s.flushRequested, delivered: counters.delivered)
        }
        if ticket != nil { wake() }
        return ticket
    }

    /// What a flush whose cycle ended gives: the events accepted since it
    /// was asked for, or the cycle's error.
    func flushOutcome(_ ticket: FlushTicket) throws(AppNorthError) -> Int {
        let outcome = state.withLock { ($0.breaker.isOpen, $0.cycleError, counters.delivered &- ticket.delivered) }
        if outcome.0 { throw Self.pausedError }
        if let error = outcome.1 { throw error }
        return max(0, outcome.2)
    }

    static let switchedOffError = AppNorthError.wrongState(
        "uploads are switched off by the config key appnorth.events (enabled: false); events stay queued")

    static let pausedError = AppNorthError.wrongState(
        "uploads are paused after consecutive failures; call start_session or foreground to resume")

    /// Uploads resume if the circuit breaker had paused them (a session,
    /// the foreground); `flush`: a cycle starts too. False once closed.
    func resume(_ why: String, flush: Bool) -> Bool {
        let wasOpen = state.withLock { s -> Bool? in
            guard !lifecycle.isClosed else { return nil }
            defer { s.breaker.reset() }
            if flush { s.flushRequested += 1 }
            return s.breaker.isOpen
        }
        guard let wasOpen else { return false }
        if wasOpen { logger.log(.info, "events: circuit breaker closed by \(why); uploads resume") }
        wake()
        return true
    }

    /// Changes state unless the queue is closed.
    func whileOpen(_ change: (inout UploaderState.Value) -> Void) -> Bool {
        state.withLock { s -> Bool in
            guard !lifecycle.isClosed else { return false }
            change(&s)
            return true
        }
    }
}

extension LockClass {
    /// `EventUploader.worker`: the upload thread's handle.
    static let eventsWorker = LockClass.leaf("EventUploader.worker")
}
