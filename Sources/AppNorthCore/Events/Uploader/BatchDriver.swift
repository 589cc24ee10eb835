/// What one batch's upload needs from the queue around it: the attempts,
/// the waits and the removal of rows. The upload thread's side is
/// `StoreBatchPort` (the store, the transport, consent); tests
/// give a port of their own and drive `BatchDriver` with no server.
protocol BatchPort {
    /// One attempt of `events` (gzip if `compressed` and the client does):
    /// what came of it (`.answered`, `.gone`, `.abandoned` or `.storageFailed`).
    mutating func attempt(_ events: [StoredEvent], compressed: Bool) -> BatchUpload.Input
    /// Sleeps a retry delay; false when a stop or a revocation cut it short.
    mutating func pause(milliseconds: Int) -> Bool
    /// Removes delivered rows, now or (`deferrable`: the whole batch) while
    /// the next batch is in flight.
    mutating func removeDelivered(_ events: [StoredEvent], deferrable: Bool)
    /// Removes rows the server refused (`byID`: the ones a 400/422 listed);
    /// returns how many rows went (a trim may have taken some).
    mutating func removeRefused(_ events: [StoredEvent], byID: Bool) -> Int
    /// A delivery resets the circuit breaker: returns the consecutive
    /// failed flushes before it.
    mutating func recordSuccess() -> Int
}

/// The uploader's driver for one batch: runs its `BatchUpload` (retries,
/// 415, splits, bisects, the budget of extra requests), doing what each
/// transition asks through the `BatchPort`, and owns what the outcome
/// means: the rows removed, the drops counted by reason
/// (`EventCounters`), deliveries counted, and one log line per
/// transition (debug) and per refusal (warning or error).
struct BatchDriver {
    let counters: EventCounters
    let logger: Logger

    func run(_ batch: [StoredEvent], schedule: Backoff, port: inout some BatchPort) -> BatchUpload.Outcome {
        var machine = BatchUpload(batch, schedule: schedule)
        var input = BatchUpload.Input.start
        var status = 0
        while true {
            let action = machine.next(input)
            logger.log(.debug, "events: " + action.summary(machine.current.count))
            switch action {
            case .attempt(let events, let compressed, let why):
                if case .half(let size, let code) = why, code != 413 {
                    logger.log(.warning, "events: HTTP \(code) for a batch of \(size) naming no event; sending it in halves")
                }
                input = port.attempt(events, compressed: compressed)
                if case .answered(_, let code, _, _, _, _) = input { status = code ?? 0 }
            case .wait(let milliseconds, _):
                input = .waited(port.pause(milliseconds: milliseconds))
            case .deliver(let events, let deferrable):
                delivered(events, status: status, deferrable: deferrable, &port)
                input = .done
            case .drop(let events, let reason):
                drop(events, reason, status: status, of: reason == .overBudget ? batch.count : machine.current.count, &port)
                input = .done
            case .finish(let outcome):
                return outcome
            }
        }
    }

    /// Delivered rows: removed and counted.
    private func delivered(_ events: [StoredEvent], status: Int, deferrable: Bool, _ port: inout some BatchPort) {
        port.removeDelivered(events, deferrable: deferrable)
        counters.deliver(events.count)
        let failuresBefore = port.recordSuccess()
        logger.log(.debug, "events: batch of \(events.count) delivered (HTTP \(status))")
        if failuresBefore > 0 { logger.log(.info, "events: uploads work again after \(failuresBefore) failure(s)") }
    }

    /// Rows the server refused: removed and counted by their reason.
    /// `part`: the events of the part they belong to (of the batch, past the budget).
    private func drop(_ events: [StoredEvent], _ reason: BatchUpload.DropReason, status: Int, of part: Int,
                      _ port: inout some BatchPort) {
        let gone = port.removeRefused(events, byID: reason == .rejected)
        counters.drop(gone, reason.counted)
        switch reason {
        case .rejected:
            logger.log(.error, "the server rejected \(events.count) of \(part) events (HTTP \(status)): "
                       + "dropped them, sending the rest; check the event schema")
        case .refused:
            logger.log(.error, "event batch of \(events.count) discarded after HTTP \(status): check the event schema")
        case .tooLarge:
            logger.log(.warning, "an event was too large for the server (HTTP 413) and was dropped")
        case .overBudget:
            logger.log(.error, "the server kept refusing a batch (HTTP \(status)): \(events.count) event(s) of a batch of "
                       + "\(part) discarded after its \(BatchUpload.extraBudget(part)) extra requests; "
                       + "check the event schema and the server's body limit")
        }
    }
}
