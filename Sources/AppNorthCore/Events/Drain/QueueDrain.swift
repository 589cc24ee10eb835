/// Moving journaled events into the table under the queue's limits, for
/// the stages that need it (the track gate past the limits, the uploader
/// before a batch, `close`, the getters): the store drains and trims (its
/// counters count the drops, `queue_limit`); this logs what was dropped.
struct QueueDrain: Sendable {
    let store: EventStore
    let limits: (count: Int, bytes: Int)
    let logger: Logger

    /// Moves journaled events into SQLite (`part`: at most that many, the
    /// oldest; see `EventStore.drainPart`), then drops the oldest past the
    /// limits.
    func run(replacingFiles: Bool = true, part: Int? = nil) throws(AppNorthError) {
        let dropped: Int
        if let part {
            dropped = try store.drainPart(part, trimmingTo: limits)
        } else {
            dropped = try store.drain(trimmingTo: limits, replacingFiles: replacingFiles)
        }
        if dropped > 0 { logger.log(.warning, "event queue over its limits: dropped the \(dropped) oldest event(s)") }
    }

    /// Drains and trims when the queue is past a limit, so that what the
    /// host reads holds the limits exactly.
    func trimToLimits() {
        let queued = store.directoryQueued
        if queued.count > limits.count || queued.bytes > limits.bytes { _ = try? run() }
    }

    /// Moves the journal into the table without a trim (`track`, when
    /// its file and its copy would pass the byte limit: FileBudget).
    func importJournal() throws(AppNorthError) {
        try store.importer.importJournal(rowLimit: limits.bytes)
    }

    /// Gives the empty queue's space back (`SQLiteStore.compact`), in
    /// steps small enough for the files' budget while the file is large.
    func compact() {
        store.db.compact(stepPages: FileBudget.walPages(files: store.db.databaseBytes, rowLimit: limits.bytes))
    }

    /// How many journaled events the upload cycle imports at a time: a
    /// part costs less than a request's wait (about 1 ms here, against
    /// 5 ms or more for a request), and holds at least two batches, so the
    /// table always holds the next batch to read ahead.
    static func part(_ batchSize: Int) -> Int { max(256, batchSize.multipliedSaturating(by: 2)) }
}
