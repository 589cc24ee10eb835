/// A batch as a cycle sees it: empty or not (`PreparedBatch`; tests use
/// their own).
protocol CycleBatch {
    var isEmpty: Bool { get }
}

extension PreparedBatch: CycleBatch {
    var isEmpty: Bool { events.isEmpty }
}

/// Whether an upload cycle may send now.
enum CycleGate: Equatable {
    /// Uploads may go, in batches of `batchSize`, read under the consent `generation`.
    case go(batchSize: Int, generation: UInt64)
    /// The circuit breaker is open.
    case paused
    /// Consent does not let events out.
    case notAllowed
}

/// What one upload cycle needs from the queue around it: the gate, the
/// next batch, its upload (a `BatchDriver` through a `BatchPort`) and what
/// a failure is recorded as. The upload thread's side is
/// `StoreCyclePort` (the store, consent, the transport); tests
/// give a port of their own and drive `UploadCycle` with no server.
protocol CyclePort {
    associatedtype Batch: CycleBatch
    var isStopping: Bool { get }
    /// Whether uploads may go now (consent, the breaker); adopts another
    /// handle's consent change first.
    mutating func gate() -> CycleGate
    /// The next batch (the one read ahead if still good, else the oldest rows).
    mutating func nextBatch(_ batchSize: Int, _ generation: UInt64) throws(AppNorthError) -> Batch
    /// The journal still has parts to import (an empty batch then is not the end).
    var moreToImport: Bool { get }
    mutating func upload(_ batch: Batch, _ batchSize: Int, _ generation: UInt64) -> BatchUpload.Outcome
    /// The queue could not be read: the cycle ends, its batch kept.
    mutating func storageFailed(_ error: AppNorthError)
    /// A batch failed: one failed flush toward the circuit breaker.
    mutating func failedFlush(_ error: AppNorthError)
    /// A revocation (another handle's, adopted now) abandoned the batch.
    mutating func abandoned()
}

/// One upload cycle: batches until the queue is empty or one fails. A
/// failed cycle (a batch's first attempt and its retries, or a discarded
/// batch) counts as one failure toward the circuit breaker: the seed
/// counts failed flushes, not requests. Its result feeds `UploadTrigger`.
enum UploadCycle {
    static func run<Port: CyclePort>(_ port: inout Port) -> UploadTrigger.CycleResult {
        while !port.isStopping {
            let batchSize: Int, generation: UInt64
            switch port.gate() {
            case .go(let size, let current): (batchSize, generation) = (size, current)
            case .paused: return .paused
            case .notAllowed: return .succeeded
            }
            let batch: Port.Batch
            do {
                batch = try port.nextBatch(batchSize, generation)
            } catch {
                port.storageFailed(error)
                return .kept
            }
            if batch.isEmpty {
                // A part can hold only ids already queued: the next one then.
                if port.moreToImport { continue }
                return .succeeded
            }
            switch port.upload(batch, batchSize, generation) {
            case .delivered:
                continue
            case .abandoned:
                port.abandoned()
                return .succeeded
            case .failed(let error, let kept):
                port.failedFlush(error)
                return kept ? .kept : .discarded
            }
        }
        return .succeeded
    }
}
