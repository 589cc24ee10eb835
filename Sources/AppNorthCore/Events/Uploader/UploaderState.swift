/// What the upload thread decides by and the host reads: the network
/// type, the circuit breaker, the flushes asked for, the last errors, a
/// server's Retry-After. One owner with its own lock (a leaf); the thread
/// (`EventUploader`, `UploadLoop`) and the host's calls change it.
final class UploaderState: Sendable {
    struct Value: Sendable {
        var networkType: NetworkType
        var breaker: CircuitBreaker
        var flushRequested: UInt64 = 0
        /// The most recent upload error, for stats.
        var lastError: AppNorthError?
        /// The error that ended the last upload cycle, for flush callers.
        var cycleError: AppNorthError?
        var lastFlushMs: Int64?
        var lastAttemptMs: Int64?
        /// The uploader waits for this before its next request (Retry-After).
        var notBeforeMono: UInt64 = 0
    }

    private let lock: Lock<Value>

    init(networkType: NetworkType, breakerThreshold: Int) {
        lock = Lock(Value(networkType: networkType, breaker: CircuitBreaker(threshold: breakerThreshold)),
                    level: LockClass.uploaderState)
    }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.withLock { body(&$0) }
    }

    /// An upload error: kept for stats, logged.
    func record(_ error: AppNorthError, _ logger: Logger) {
        withLock { $0.lastError = error }
        logger.log(.warning, "event upload failed: \(error.message)")
    }

    /// A failed flush: one more toward the circuit breaker, whose opening
    /// is logged once.
    func recordFailedFlush(_ error: AppNorthError, _ logger: Logger) {
        let (opened, threshold) = withLock { s -> (Bool, Int) in
            let wasOpen = s.breaker.isOpen
            s.breaker.recordFailure()
            s.cycleError = error
            return (!wasOpen && s.breaker.isOpen, s.breaker.threshold)
        }
        if opened {
            logger.log(.warning, "events: circuit breaker open after \(threshold) failed flushes; "
                       + "uploads paused until start_session or foreground")
        }
    }

    /// A delivery resets the circuit breaker: returns the consecutive
    /// failed flushes before it.
    func recordSuccess(_ clock: any AppNorthClock) -> Int {
        withLock { s -> Int in
            let before = s.breaker.consecutiveFailures
            s.breaker.recordSuccess()
            s.lastFlushMs = clock.wallMilliseconds()
            return before
        }
    }
}

extension LockClass {
    /// `UploaderState.lock`: the uploader's breaker, flushes asked for, network type, last
    /// errors and Retry-After.
    static let uploaderState = LockClass(rank: 20, "UploaderState.lock")
}
