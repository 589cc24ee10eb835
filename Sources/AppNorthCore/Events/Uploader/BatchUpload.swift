/// One batch's upload, from its first attempt to its outcome, as a value
/// (swift-nio's `*StateMachine` structs and curl's `MSTATE_*` are the
/// models): the upload thread does what `next` answers (`Action`) and
/// feeds it what came of it (`Input`). `next` is the one transition,
/// logged by the thread. No clock, thread, lock or I/O inside, so tests
/// drive it with plain values (BatchUploadTests).
///
/// - A 2xx delivers the rows it carried.
/// - 5xx, 408, 429 and no answer are retried after the schedule's delay
///   (its jitter comes in with the answer); past its last retry the batch
///   stays queued for the next cycle (`failed(kept: true)`).
/// - A 415 to a gzip body goes again uncompressed, at once.
/// - A 413 splits the batch in halves, the second sent only once the first
///   is delivered; a single event is dropped (`payload_too_large`).
/// - A 400 or 422 that lists rejected event ids drops those
///   (`client_error`) and sends the rest at once; one that names no event
///   of a batch of several is bisected: the halves go separately, down to
///   single events, so only what the server refuses is dropped. Any other
///   4xx drops the part (`client_error`): a discarded batch.
/// - Splits, bisects, the rest after listed events and the uncompressed
///   attempt after a 415 share one budget of extra requests per batch,
///   `extraBudget(n)` = 2 x ceil(log2 n) + 2: enough to find one poisoned
///   event (two requests per level of halves) with two to spare. Past it,
///   every event of the batch not yet delivered or dropped is discarded
///   (`overBudget`, counted as `client_error`): a server that refuses
///   everything costs a few requests per batch, not 2n - 1.
/// - A batch none of whose events was delivered and some refused (any
///   4xx, a 413 included) ends `failed(kept: false)`: a failed flush for
///   the circuit breaker.
///
/// Halves nest (a half of a half), kept as a stack of `Frame`s.
struct BatchUpload: Sendable {
    /// How the upload ended: the cycle's verdict on the batch.
    enum Outcome: Equatable, Sendable {
        case delivered
        /// Kept for the next cycle (5xx, network: `kept`), or discarded (4xx).
        case failed(AppNorthError, kept: Bool)
        /// Consent was revoked or the queue is closing: the batch is left
        /// alone (a revocation has purged it).
        case abandoned
    }

    /// Why an attempt goes (for the log).
    enum Attempt: Equatable, Sendable {
        case first
        case retry(Int)
        /// The rest after the listed rejected events were dropped.
        case rest
        /// After a 415 to a gzip body.
        case uncompressed
        /// The first half of a part of `of` events, after HTTP `status`
        /// (413: split; 400/422: bisect).
        case half(of: Int, status: Int)
        /// The second half, once the first has ended.
        case secondHalf
    }

    enum DropReason: String, Equatable, Sendable {
        /// Events the server listed as rejected: removed by id.
        case rejected
        /// The whole part, refused by a 4xx.
        case refused
        /// A single event refused by a 413.
        case tooLarge
        /// What was left of a batch once its extra requests were spent.
        case overBudget
        /// The stats' reason.
        var counted: EventCounters.DropReason { self == .tooLarge ? .payloadTooLarge : .clientError }
    }

    enum Action: Equatable, Sendable {
        /// One attempt with these rows (the thread re-reads which are still
        /// queued, leases and POSTs them): answer `.answered`, `.gone`,
        /// `.abandoned` or `.storageFailed`. `compressed`: gzip if the client does.
        case attempt([StoredEvent], compressed: Bool, why: Attempt)
        /// Sleep the retry delay: answer `.waited`.
        case wait(milliseconds: Int, retry: Int)
        /// These rows were delivered: remove them (`deferrable`: the whole
        /// batch, whose rows the cycle may delete while the next is in
        /// flight) and count them. Answer `.done`.
        case deliver([StoredEvent], deferrable: Bool)
        /// Remove these rows the server refused; count them. Answer `.done`.
        case drop([StoredEvent], DropReason)
        case finish(Outcome)
    }

    enum Input: Equatable, Sendable {
        case start
        /// The server's answer (or none: `status` nil) to an attempt that
        /// carried `sent` (the rows still queued then), gzipped or not.
        /// `rejected`: the ids a 400/422 lists (nil: none readable).
        /// `jitter`: a random unit (0...1) for a retry's delay.
        case answered(sent: [StoredEvent], status: Int?, error: AppNorthError?, gzipped: Bool,
                      rejected: Set<String>?, jitter: Double)
        /// Every row of the attempt had left the queue before it (a trim,
        /// a purge, another handle): nothing to send.
        case gone
        /// Consent was revoked or the queue is closing.
        case abandoned
        /// The queue could not be read.
        case storageFailed(AppNorthError)
        /// The wait ended (`false`: cut short by a stop or a revocation).
        case waited(Bool)
        /// A `deliver` or `drop` was done.
        case done
    }

    /// A split or bisected part: the half still to send, or (nil) the
    /// second half is under way.
    struct Frame: Equatable, Sendable {
        var bisect: Bool
        var second: [StoredEvent]?
        var firstFailed = false
    }

    private(set) var current: [StoredEvent]
    private(set) var compress = true
    private(set) var retries = 0
    private(set) var frames: [Frame] = []
    /// What a `.done` leads to: the rest to send, or the part's end.
    private var afterDone: (rest: [StoredEvent]?, end: Outcome?) = (nil, nil)
    let schedule: Backoff
    /// Extra requests still allowed (splits, bisects, rests, uncompressed).
    private(set) var extraLeft: Int
    /// Some rows were delivered / refused (dropped) so far.
    private(set) var deliveredAny = false
    private(set) var refusal: AppNorthError?

    init(_ batch: [StoredEvent], schedule: Backoff) {
        current = batch
        self.schedule = schedule
        extraLeft = Self.extraBudget(batch.count)
    }

    /// The extra requests a batch of `count` may cost beyond its first
    /// attempt and its retries: 2 x ceil(log2 count) + 2 (2 for one event,
    /// 12 for 20, 16 for 100).
    static func extraBudget(_ count: Int) -> Int {
        var levels = 0
        while levels < Int.bitWidth - 2, (1 << levels) < count { levels += 1 }
        return 2 * levels + 2
    }

    /// The one transition.
    mutating func next(_ input: Input) -> Action {
        switch input {
        case .start: return .attempt(current, compressed: compress, why: .first)
        case .gone: return endPart(.delivered)
        case .abandoned: return finishAll(.abandoned)
        case .storageFailed(let error): return endPart(.failed(error, kept: true))
        case .waited(let completed):
            return completed ? .attempt(current, compressed: compress, why: .retry(retries)) : finishAll(.abandoned)
        case .done:
            let (rest, end) = afterDone
            afterDone = (nil, nil)
            if let rest { return extra(rest, why: .rest) }
            return endPart(end ?? .delivered)
        case .answered(let sent, let status, let error, let gzipped, let rejected, let jitter):
            if !sent.isEmpty { current = sent }
            return answered(status, error, gzipped: gzipped, rejected: rejected, jitter: jitter)
        }
    }

    private mutating func answered(_ status: Int?, _ error: AppNorthError?, gzipped: Bool,
                                   rejected: Set<String>?, jitter: Double) -> Action {
        let code = status ?? 0
        switch UploadStatusPolicy.outcome(for: status) {
        case .delivered:
            afterDone = (nil, .delivered)
            deliveredAny = true
            return .deliver(current, deferrable: frames.isEmpty)
        case .discard:
            let failure = AppNorthError.http("HTTP \(code)", httpStatus: code)
            refusal = error ?? failure
            if code == 415 && gzipped {
                compress = false
                return extra(current, why: .uncompressed)
            }
            let refusable = code == 400 || code == 422
            if refusable, let rejected, current.contains(where: { rejected.contains($0.id) }) {
                let rest = current.filter { !rejected.contains($0.id) }
                afterDone = rest.isEmpty ? (nil, .failed(error ?? failure, kept: false)) : (rest, nil)
                return .drop(current.filter { rejected.contains($0.id) }, .rejected)
            }
            if refusable && current.count > 1 { return halve(bisect: true, status: code) }
            afterDone = (nil, .failed(error ?? failure, kept: false))
            return .drop(current, .refused)
        case .split:
            refusal = error ?? .http("HTTP \(code)", httpStatus: code)
            if current.count > 1 { return halve(bisect: false, status: code) }
            afterDone = (nil, .delivered)
            return .drop(current, .tooLarge)
        case .retry:
            retries += 1
            guard let delay = schedule.delay(retry: retries, unit: jitter) else {
                return endPart(.failed(error ?? .network("no response"), kept: true))
            }
            return .wait(milliseconds: delay, retry: retries)
        }
    }

    /// Sends the first half of the current part, the second kept on a frame.
    private mutating func halve(bisect: Bool, status: Int) -> Action {
        guard extraLeft > 0 else { return overBudget() }
        let half = current.count / 2
        frames.append(Frame(bisect: bisect, second: Array(current[half...])))
        return extra(Array(current[..<half]), why: .half(of: current.count, status: status))
    }

    /// An extra attempt of `part`, if the budget has one left; else the
    /// rest of the batch is discarded.
    private mutating func extra(_ part: [StoredEvent], why: Attempt) -> Action {
        current = part
        guard extraLeft > 0 else { return overBudget() }
        extraLeft -= 1
        retries = 0
        return .attempt(part, compressed: compress, why: why)
    }

    /// The budget is spent: what is left of the batch (the current part,
    /// not sent again, and every half still to send) is dropped, and the
    /// batch ends, failed.
    private mutating func overBudget() -> Action {
        let rest = (current + frames.compactMap(\.second).joined()).sorted { $0.seq < $1.seq }
        frames.removeAll()
        afterDone = (nil, .failed(refusal ?? .http("HTTP 400", httpStatus: 400), kept: false))
        return .drop(rest, .overBudget)
    }

    /// The current part ended with `outcome`: the frames above it decide
    /// whether a second half goes, and what the parts add up to.
    private mutating func endPart(_ outcome: Outcome) -> Action {
        var outcome = outcome
        while let frame = frames.popLast() {
            let stops: Bool
            switch outcome {
            case .abandoned, .failed(_, kept: true): stops = true
            case .failed(_, kept: false): stops = !frame.bisect  // a split's second half waits for the first
            case .delivered: stops = false
            }
            if let second = frame.second {
                // The first half ended.
                guard !stops else { continue }
                frames.append(Frame(bisect: frame.bisect, second: nil, firstFailed: outcome != .delivered))
                return extra(second, why: .secondHalf)
            }
            // The second half ended: a bisected part is discarded only if
            // both halves were; delivered if any part went through.
            if frame.bisect, !stops, !(frame.firstFailed && outcome != .delivered) { outcome = .delivered }
        }
        return .finish(settled(outcome))
    }

    /// The batch's verdict: some rows delivered, it went; none delivered
    /// and some refused (a 413 included), it failed, discarded.
    private func settled(_ outcome: Outcome) -> Outcome {
        switch outcome {
        case .delivered where !deliveredAny:
            if let refusal { return .failed(refusal, kept: false) }
            return outcome
        default: return outcome
        }
    }

    private mutating func finishAll(_ outcome: Outcome) -> Action {
        frames.removeAll()
        return .finish(outcome)
    }
}

extension BatchUpload.Action {
    /// One line for the transition log, of a part of `count` events:
    /// "events: batch of 20 failed; retry 1 in 1000 ms".
    func summary(_ count: Int) -> String {
        switch self {
        case .attempt(let rows, let compressed, let why):
            "batch of \(rows.count): attempt (\(why)\(compressed ? "" : ", uncompressed"))"
        case .wait(let milliseconds, let retry): "batch of \(count) failed; retry \(retry) in \(milliseconds) ms"
        case .deliver(let rows, _): "batch of \(rows.count): remove as delivered"
        case .drop(let rows, let reason): "batch of \(count): drop \(rows.count) (\(reason.rawValue))"
        case .finish(let outcome): "batch of \(count): finished, \(outcome)"
        }
    }
}
