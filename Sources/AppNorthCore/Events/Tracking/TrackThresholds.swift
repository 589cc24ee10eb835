/// The figures past which `track` acts, fixed at open, as a value (no
/// lock, atomic or thread inside; TrackThresholdsTests).
///
/// - `limits`: the queue's limits with their slack. Past them `track`
///   drains and trims on the calling thread: at the limit (offline, the
///   queue full), one drain per event would cost more than the journal
///   saves; one per 1 % of the limit costs little.
/// - `step`, `margin`: a stripe publishes its counts every `step` records
///   (or bytes), a small part of the limits, so that all stripes'
///   unpublished records together stay within `margin` of them
///   (`EventStore.queuedAfterAppend`). With small limits the step is 1:
///   every event counts at once, as without stripes. A flush threshold
///   below the margin (the default 20) makes every count exact while
///   uploads succeed (`near`); while they fail, only the limits matter.
struct TrackThresholds: Sendable, Equatable {
    let limits: Figures
    let step: Figures
    let margin: Figures
    /// The byte limit with its slack while another handle's or process's
    /// journal holds events (`QueueLimits.shared`): the rows' shared
    /// share (`FileBudget.sharedRowBytes`), so that the database file
    /// does not grow past it between trims.
    let sharedBytes: Int
    /// The most this handle journals before its journal goes in while
    /// the directory is shared (`FileBudget.sharedJournalBytes`).
    let sharedJournal: Int
    /// How many events this handle tracks between two counts of the whole
    /// directory while it is shared (`QueueLimits.isOver`): the count's
    /// 1 % of slack, at least one. Its own view (the table at its last
    /// count, its journal) does not see what the others journal or import
    /// meanwhile, so each handle tracking adds at most this much past the
    /// limit and its slack before a count finds it over.
    let sharedCount: Int

    struct Figures: Sendable, Equatable {
        var count: Int
        var bytes: Int
        var pair: (count: Int, bytes: Int) { (count, bytes) }
    }

    init(_ options: AppNorthEventsOptions, stripes: Int) {
        let events = max(0, options.maxQueuedEvents), bytes = max(0, options.maxQueuedBytes)
        let stripes = max(1, stripes)
        limits = Figures(count: events.addingSaturating(max(0, min(100, events / 100))),
                         bytes: bytes.addingSaturating(bytes / 100))
        step = Figures(count: max(1, min(32, events / (4 * stripes))), bytes: max(1, min(32 << 10, bytes / (4 * stripes))))
        margin = Figures(count: step.count.multipliedSaturating(by: stripes), bytes: step.bytes.multipliedSaturating(by: stripes))
        let shared = FileBudget.sharedRowBytes(bytes)
        sharedBytes = shared.addingSaturating(shared / 100)
        sharedJournal = max(step.bytes, FileBudget.sharedJournalBytes(bytes))
        sharedCount = max(1, limits.count - events)
    }

    /// Whether a queued figure is past the limits with their slack
    /// (`shared`: the byte limit is `sharedBytes`).
    func pastLimits(_ queued: (count: Int, bytes: Int), shared: Bool = false) -> Bool {
        queued.count > limits.count || queued.bytes > (shared ? sharedBytes : limits.bytes)
    }

    /// The figures at which `track` counts exactly: the uploader's wake-up
    /// count (`wakeAt`) and the limits. After a failed upload `track` does
    /// not wake the uploader (the timer brings the next attempt: `wakeAt`
    /// is Int.max), so only the limits count: an offline queue above the
    /// threshold is then not counted exactly on every event, which would
    /// make every tracking thread write the shared totals.
    func near(wakeAt: Int, shared: Bool = false) -> (count: Int, bytes: Int) {
        (min(wakeAt, limits.count.addingSaturating(1)), (shared ? sharedBytes : limits.bytes).addingSaturating(1))
    }
}
