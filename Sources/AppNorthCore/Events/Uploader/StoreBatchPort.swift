/// This queue as a batch's `BatchPort`: attempts through the store and
/// the transport under the batch's consent generation.
struct StoreBatchPort: BatchPort {
    let uploader: EventUploader
    let generation: UInt64
    let thread: BackgroundThread
    let prepared: ([StoredEvent], BatchBody)?
    let deferRemoval: (([StoredEvent]) -> Void)?
    /// Runs with the first attempt only.
    var whileWaiting: (() -> Void)?

    mutating func attempt(_ rows: [StoredEvent], compressed: Bool) -> BatchUpload.Input {
        defer { whileWaiting = nil }
        return uploader.attempt(rows, compressed: compressed, generation, thread, prepared: prepared,
                              whileWaiting: whileWaiting)
    }

    func pause(milliseconds: Int) -> Bool { uploader.pause(milliseconds: milliseconds, generation, thread) }

    func removeDelivered(_ rows: [StoredEvent], deferrable: Bool) {
        if deferrable, let deferRemoval { deferRemoval(rows) } else { _ = try? uploader.store.remove(rows) }
    }

    func removeRefused(_ rows: [StoredEvent], byID: Bool) -> Int {
        (byID ? try? uploader.store.remove(ids: rows.map(\.id)) : try? uploader.store.remove(rows)) ?? 0
    }

    func recordSuccess() -> Int {
        uploader.state.withLock { s -> Int in
            let before = s.breaker.consecutiveFailures
            s.breaker.recordSuccess()
            s.lastFlushMs = uploader.clock.wallMilliseconds()
            return before
        }
    }
}
