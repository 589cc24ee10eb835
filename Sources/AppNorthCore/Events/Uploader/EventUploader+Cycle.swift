import Synchronization

/// The upload cycle against the store: `UploadCycle` through this queue's
/// `CyclePort`.
extension EventUploader {
    /// Uploads batches until the queue is empty or one fails (`UploadCycle`).
    ///
    /// Batches go one after another, and the work between two of them
    /// overlaps the server's: while a batch's request is in flight, the
    /// thread deletes the batch delivered before it and reads, checks and
    /// encodes the next one (`PreparedBatch`), which goes out as soon as
    /// the answer is in, if nothing it was read under has changed.
    func cycle(_ thread: BackgroundThread) -> UploadTrigger.CycleResult {
        state.withLock { $0.cycleError = nil }
        var port = StoreCyclePort(uploader: self, thread: thread)
        defer {
            port.pipeline.deleteDelivered(store)
            store.releaseLease()  // every attempt has ended (`endAttempt`)
        }
        return UploadCycle.run(&port)
    }

    /// Reads the oldest `limit` events (after `after`) and encodes them,
    /// noting what they were read under.
    func prepareBatch(_ limit: Int, after: Int64?, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        // Noted before the read: a removal during it shows as a change.
        let removals = store.table.removals.load(ordering: .acquiring)
        let events = try store.oldest(limit, after: after)
        return PreparedBatch(events: events, body: BatchBody(events, client.compression), generation: generation,
                             removals: removals)
    }
}
