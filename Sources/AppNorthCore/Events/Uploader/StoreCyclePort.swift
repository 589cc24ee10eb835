import Synchronization

/// What one cycle carries from a batch to the next: the batch read
/// while the previous one was in flight, and a delivered batch whose
/// rows are deleted while the next is in flight (a crash before that
/// resends it; the server deduplicates). Only the upload thread uses it.
final class CyclePipeline {
    var ahead: PreparedBatch?
    var undeleted: [StoredEvent] = []

    func deleteDelivered(_ store: EventStore) {
        guard !undeleted.isEmpty else { return }
        _ = try? store.remove(undeleted)
        undeleted = []
        store.limits.leaseFloor.store(Int64.max, ordering: .relaxed)
    }

    /// The batch before, if its request's wait did not delete it; the
    /// delivered rows stay leased until deleted (a trim must not count
    /// them as dropped).
    func deferRemoval(of delivered: [StoredEvent], _ store: EventStore) {
        deleteDelivered(store)
        undeleted = delivered
        if let first = delivered.first?.seq { store.limits.leaseFloor.store(first, ordering: .relaxed) }
    }
}

/// This queue as a cycle's `CyclePort`.
struct StoreCyclePort: CyclePort {
    let uploader: EventUploader
    let thread: BackgroundThread
    let pipeline = CyclePipeline()

    var isStopping: Bool { thread.isStopping }
    var moreToImport: Bool { uploader.store.hasRetiredRest }

    func gate() -> CycleGate {
        uploader.consent.refresh()
        let (allowed, generation) = uploader.consent.uploadGate
        let (open, batchSize) = uploader.state.withLock { ($0.breaker.isOpen, $0.networkType.batchSize) }
        if open { return .paused }
        return allowed ? .go(batchSize: batchSize, generation: generation) : .notAllowed
    }

    /// The batch read ahead, if it is still what a read now would give
    /// (a short one may have missed rows drained since); else the
    /// journal's oldest part goes in (the rest goes in while the
    /// requests are in flight) and the oldest rows are read.
    func nextBatch(_ batchSize: Int, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        let store = uploader.store
        try store.recoverOrphansIfDue()
        defer { pipeline.ahead = nil }
        if let next = pipeline.ahead, next.generation == generation, next.events.count == batchSize,
           next.removals == store.table.removals.load(ordering: .acquiring) {
            return next
        }
        try uploader.drain.run(part: QueueDrain.part(batchSize))
        pipeline.deleteDelivered(store)
        return try uploader.prepareBatch(batchSize, after: nil, generation)
    }

    func upload(_ batch: PreparedBatch, _ batchSize: Int, _ generation: UInt64) -> BatchUpload.Outcome {
        let uploader = uploader, pipeline = pipeline, store = uploader.store
        return uploader.upload(batch.events, generation, thread, body: batch.body, deferRemoval: { delivered in
            pipeline.deferRemoval(of: delivered, store)
        }, whileWaiting: {
            pipeline.deleteDelivered(store)
            // The journal's next part, while the server works (a failure
            // is met again, and reported, before the next batch).
            if store.hasRetiredRest { try? uploader.drain.run(part: QueueDrain.part(batchSize)) }
            pipeline.ahead = try? uploader.prepareBatch(batchSize, after: batch.events.last?.seq, generation)
        })
    }

    func storageFailed(_ error: AppNorthError) {
        uploader.record(error)
        uploader.state.withLock { $0.cycleError = error }
    }

    func failedFlush(_ error: AppNorthError) { uploader.recordFailedFlush(error) }

    /// A revocation by another handle is acted on now, not at the next track.
    func abandoned() { uploader.consent.refresh() }
}
