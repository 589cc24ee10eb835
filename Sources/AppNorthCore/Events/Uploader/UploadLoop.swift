/// The upload thread's executor loop: one cycle uploads batches until the
/// queue is empty or one fails, each batch through its `BatchUpload`
/// (retries, 415, split, bisect, the budget), each attempt through the
/// `UploadWorld`. It owns what the answers mean: the rows settled, drops
/// counted by reason and deliveries counted (`EventCounters`), the circuit
/// breaker, the last errors and a server's Retry-After (`UploaderState`),
/// one log line per transition (debug) and per refusal (warning or error).
///
/// Batches go one after another, and the work between two of them
/// overlaps the server's: once a batch's first attempt is sent, the world
/// deletes the batch delivered before it and reads, checks and encodes
/// the next one (`UploadWorld.prefetch`), which goes out as soon as the
/// answer is in, if nothing it was read under has changed.
struct UploadLoop<World: UploadWorld> {
    var world: World
    let state: UploaderState
    let counters: EventCounters
    let logger: Logger
    let clock: any AppNorthClock
    let schedule: Backoff
    let retryAfterCapMilliseconds: Int
    /// A random unit (0...1) for a retry's jitter.
    var jitter: () -> Double = { Random.unit() }
    /// Whether the settings switch uploads off now (the config key
    /// `appnorth.events`, `EventSettingsOwner`): looked at before every
    /// batch; the events stay queued.
    var switchedOff: () -> Bool = { false }

    /// One upload cycle: batches until the queue is empty or one fails. A
    /// failed cycle (a batch's first attempt and its retries, or a
    /// discarded batch) counts as one failure toward the circuit breaker:
    /// the seed counts failed flushes, not requests. Its result feeds
    /// `UploadTrigger`.
    mutating func cycle() -> UploadTrigger.CycleResult {
        state.withLock { $0.cycleError = nil }
        defer { world.settle(.cycleEnded) }
        while !world.isStopping {
            if switchedOff() {
                state.withLock { $0.cycleError = EventUploader.switchedOffError }
                return .paused
            }
            let (paused, size) = state.withLock { ($0.breaker.isOpen, $0.networkType.batchSize) }
            if paused { return .paused }
            guard let generation = world.consentGeneration() else { return .succeeded }
            let batch: PreparedBatch
            do {
                batch = try world.readBatch(size, generation)
            } catch {
                // Not the server's: the breaker is not told.
                state.record(error, logger)
                state.withLock { $0.cycleError = error }
                return .kept
            }
            if batch.events.isEmpty {
                // A part can hold only ids already queued: the next one then.
                if world.moreToImport { continue }
                return .succeeded
            }
            switch upload(batch, size, generation) {
            case .delivered:
                continue
            case .abandoned:
                // A revocation by another handle is acted on now, not at the next track.
                _ = world.consentGeneration()
                return .succeeded
            case .failed(let error, let kept):
                state.recordFailedFlush(error, logger)
                return kept ? .kept : .discarded
            }
        }
        return .succeeded
    }

    /// One batch, from its first attempt to its outcome: does what its
    /// `BatchUpload` answers and feeds it what came of it.
    mutating func upload(_ batch: PreparedBatch, _ size: Int, _ generation: UInt64) -> BatchUpload.Outcome {
        var machine = BatchUpload(batch.events, schedule: schedule)
        var input = BatchUpload.Input.start
        var status = 0
        var prefetched = false
        while true {
            let action = machine.next(input)
            logger.log(.debug, "events: " + action.summary(machine.current.count))
            switch action {
            case .attempt(let rows, let compressed, let why):
                if case .half(let part, let code) = why, code != 413 {
                    logger.log(.warning, "events: HTTP \(code) for a batch of \(part) naming no event; sending it in halves")
                }
                input = attempt(rows, compressed: compressed, of: batch, size, generation, prefetched: &prefetched)
                if case .answered(_, let code, _, _, _, _) = input { status = code ?? 0 }
            case .wait(let milliseconds, _):
                input = .waited(world.sleep(milliseconds: milliseconds, generation))
            case .deliver(let rows, let deferrable):
                delivered(rows, status: status, deferrable: deferrable)
                input = .done
            case .drop(let rows, let reason):
                drop(rows, reason, status: status, of: reason == .overBudget ? batch.events.count : machine.current.count)
                input = .done
            case .finish(let outcome):
                return outcome
            }
        }
    }

    /// One attempt of `rows` (all or a part of `batch`): waits out a
    /// Retry-After, leases the rows still queued (those a trim, a purge or
    /// another handle deleted since the batch was read are not sent),
    /// sends them, prefetches once per batch, and takes the answer.
    mutating func attempt(_ rows: [StoredEvent], compressed: Bool, of batch: PreparedBatch, _ size: Int,
                          _ generation: UInt64, prefetched: inout Bool) -> BatchUpload.Input {
        guard waitForRetryAfter(generation) else { return .abandoned }
        let rest: [StoredEvent]
        do {
            rest = try world.lease(rows)
        } catch {
            return .storageFailed(.storage("cannot read the event queue"))
        }
        if rest.isEmpty { return .gone }
        if rest.count != rows.count {
            logger.log(.debug, "events: \(rows.count - rest.count) event(s) of the batch left the queue before its attempt")
        }
        // `rest` is a part of the batch: the same rows when as many.
        let body = rest.count == batch.events.count ? batch.body : nil
        guard let sending = world.send(rest, body: body, compressed: compressed, generation) else { return .abandoned }
        if !prefetched {
            prefetched = true
            world.prefetch(after: batch.events.last?.seq, size, generation)
        }
        guard let answer = world.receive(sending) else { return .abandoned }
        state.withLock { $0.lastAttemptMs = clock.wallMilliseconds() }
        note(answer)
        let rejected = answer.response.flatMap { $0.status == 400 || $0.status == 422 ? RejectedEvents.ids(in: $0.body) : nil }
        return .answered(sent: rest, status: answer.status, error: answer.error, gzipped: answer.gzipped,
                         rejected: rejected, jitter: jitter())
    }

    /// Waits out a server's Retry-After. False when the thread is stopping
    /// or consent was revoked meanwhile.
    mutating func waitForRetryAfter(_ generation: UInt64) -> Bool {
        let until = state.withLock { $0.notBeforeMono }
        let now = clock.monotonicNanoseconds()
        return until <= now || world.sleep(milliseconds: Int((until - now) / 1_000_000), generation)
    }

    /// What an answer tells beyond the batch: a failure is recorded (the
    /// stats' last error, a warning) and a Retry-After is kept for every
    /// attempt and cycle. (A 415 to a gzip body is the world's: the
    /// client's compression turns off.)
    func note(_ answer: UploadAnswer) {
        guard let error = answer.error, !(answer.status == 415 && answer.gzipped) else { return }
        state.record(error, logger)
        if UploadStatusPolicy.outcome(for: answer.status) == .retry, let response = answer.response,
           let wait = RetryAfter.milliseconds(for: response, nowWallMs: clock.wallMilliseconds(),
                                              capMs: retryAfterCapMilliseconds) {
            let until = clock.monotonicNanoseconds().addingSaturating(UInt64(clamping: wait).multipliedSaturating(by: 1_000_000))
            state.withLock { $0.notBeforeMono = until }
        }
    }

    /// Delivered rows: settled and counted; the breaker is reset.
    private mutating func delivered(_ rows: [StoredEvent], status: Int, deferrable: Bool) {
        world.settle(.delivered(rows, deferrable: deferrable))
        counters.deliver(rows.count)
        let failuresBefore = state.recordSuccess(clock)
        logger.log(.debug, "events: batch of \(rows.count) delivered (HTTP \(status))")
        if failuresBefore > 0 { logger.log(.info, "events: uploads work again after \(failuresBefore) failure(s)") }
    }

    /// Rows the server refused: removed and counted by their reason (only
    /// those still queued: a trim may have taken some). `part`: the events
    /// of the part they belong to (of the batch, past the budget).
    private mutating func drop(_ rows: [StoredEvent], _ reason: BatchUpload.DropReason, status: Int, of part: Int) {
        let gone = world.settle(.refused(rows, byID: reason == .rejected))
        counters.drop(gone, reason.counted)
        switch reason {
        case .rejected:
            logger.log(.error, "the server rejected \(rows.count) of \(part) events (HTTP \(status)): "
                       + "dropped them, sending the rest; check the event schema")
        case .refused:
            logger.log(.error, "event batch of \(rows.count) discarded after HTTP \(status): check the event schema")
        case .tooLarge:
            logger.log(.warning, "an event was too large for the server (HTTP 413) and was dropped")
        case .overBudget:
            logger.log(.error, "the server kept refusing a batch (HTTP \(status)): \(rows.count) event(s) of a batch of "
                       + "\(part) discarded after its \(BatchUpload.extraBudget(part)) extra requests; "
                       + "check the event schema and the server's body limit")
        }
    }
}
