/// When the upload thread starts a flush cycle, as a value: the thread
/// feeds it what it sees (`Inputs`) and does what it answers (`Action`);
/// `cycleEnded` moves it on. No clock, thread or lock inside, so tests
/// drive it with plain numbers (UploadTriggerStateTests).
///
/// A cycle starts when `flush` asked for one, when the flush interval has
/// passed since the last one, or when the queue reaches the trigger
/// count: the threshold (20), or after a cycle whose batch stays queued
/// (5xx, network), 20 more than that cycle left, and then no sooner than
/// the retry schedule's backoff (its base delay doubled per consecutive
/// failed flush, up to its last delay) or the server's Retry-After. After
/// a discarded batch (4xx) the threshold is the threshold again. With the
/// circuit breaker open only `flush` and the timer count (the cycle then
/// ends at once, paused).
struct UploadTrigger: Sendable, Equatable {
    private(set) var threshold: Int
    private(set) var intervalNanoseconds: UInt64
    private(set) var lastCycleEnd: UInt64
    private(set) var triggerCount: Int
    private(set) var notBefore: UInt64 = 0
    private(set) var completedFlush: UInt64 = 0

    init(threshold: Int, intervalMilliseconds: Int, openedAt: UInt64) {
        self.threshold = max(1, threshold)
        intervalNanoseconds = UInt64(clamping: max(0, intervalMilliseconds)).multipliedSaturating(by: 1_000_000)
        lastCycleEnd = openedAt
        triggerCount = self.threshold
    }

    /// The threshold and interval from now on (the settings may change at
    /// any turn: `EventSettingsOwner`). A count waiting on the threshold
    /// moves with it; one past a failed cycle keeps its distance.
    mutating func adopt(threshold newThreshold: Int, intervalMilliseconds: Int) {
        let newThreshold = max(1, newThreshold)
        if newThreshold != threshold {
            triggerCount = max(newThreshold, triggerCount.subtractingSaturating(threshold).addingSaturating(newThreshold))
            threshold = newThreshold
        }
        intervalNanoseconds = UInt64(clamping: max(0, intervalMilliseconds)).multipliedSaturating(by: 1_000_000)
    }

    /// What the thread sees at one turn.
    struct Inputs: Equatable {
        var now: UInt64
        var queued: Int
        /// `flush` calls so far (a counter).
        var flushRequested: UInt64
        var breakerOpen: Bool
    }

    enum Action: Equatable {
        /// Run a cycle now; `flushTarget` is what its end completes.
        case runCycle(flushTarget: UInt64, reason: Reason)
        /// Sleep up to `milliseconds` (a wake may cut it short), `track`
        /// waking the thread once `queued` reaches `wakeAt`.
        case sleep(milliseconds: Int, wakeAt: Int)
    }

    enum Reason: String, Equatable { case flush, timer, threshold }

    /// The decision for one turn. Pure.
    func next(_ seen: Inputs) -> Action {
        if seen.flushRequested > completedFlush { return .runCycle(flushTarget: seen.flushRequested, reason: .flush) }
        let elapsed = seen.now &- lastCycleEnd
        if elapsed >= intervalNanoseconds { return .runCycle(flushTarget: seen.flushRequested, reason: .timer) }
        let reached = !seen.breakerOpen && seen.queued >= triggerCount
        let backoff = notBefore > seen.now ? notBefore - seen.now : 0
        if reached && backoff == 0 { return .runCycle(flushTarget: seen.flushRequested, reason: .threshold) }
        var sleep = intervalNanoseconds - elapsed
        if reached { sleep = min(sleep, backoff) }
        // Waiting out a backoff with the count reached, or paused: a
        // wake-up from `track` would change nothing.
        let wakeAt = reached || seen.breakerOpen ? Int.max : triggerCount
        return .sleep(milliseconds: Self.milliseconds(rounding: sleep), wakeAt: wakeAt)
    }

    /// How a cycle ended, for what starts the next one.
    enum CycleResult: Equatable {
        /// Everything went, or consent stopped it: the threshold wakes the uploader.
        case succeeded
        /// A batch was discarded (4xx): a failed flush, but the next 20
        /// events still go at once (nothing is waiting to be retried).
        case discarded
        /// A batch failed and stays queued (5xx, network): 20 new events
        /// start the next cycle, no sooner than the backoff allows.
        case kept
        /// The circuit breaker is open: nothing but `flush` and the timer
        /// starts a cycle until a session or foreground.
        case paused
    }

    /// After a cycle that ran for `flushTarget`: `queued` is what it left,
    /// `failures` the breaker's consecutive failed flushes, `retryAfterUntil`
    /// the end of a server's Retry-After (0: none). Returns the count at
    /// which `track` wakes the thread from now on.
    mutating func cycleEnded(_ result: CycleResult, at end: UInt64, flushTarget: UInt64, queued: Int, failures: Int,
                             schedule: Backoff, retryAfterUntil: UInt64) -> Int {
        lastCycleEnd = end
        completedFlush = max(completedFlush, flushTarget)
        switch result {
        case .succeeded, .discarded, .paused:
            triggerCount = threshold
            notBefore = 0
        case .kept:
            triggerCount = max(0, queued).addingSaturating(threshold)
            let retry = min(max(1, failures), max(1, schedule.retries))
            let backoff = UInt64(clamping: schedule.nominalDelay(retry: retry) ?? 0).multipliedSaturating(by: 1_000_000)
            notBefore = max(retryAfterUntil, end.addingSaturating(backoff))
        }
        return result == .paused ? Int.max : triggerCount
    }

    static func milliseconds(rounding nanoseconds: UInt64) -> Int {
        Int(clamping: nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1))
    }
}
