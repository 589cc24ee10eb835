import Synchronization

/// One of a journal's stripes: the threads that map to it (`EventJournal`)
/// append to its own file under its own lock, so threads tracking at once
/// share no lock, no file and no counter.
///
/// The lock is held through the whole append (the consent check, building
/// the event, the `writev`): a rotation takes it to swap the segment, so it
/// never takes a segment halfway through a write, and a revocation that
/// rotated every stripe knows no write it has not purged is still running.
final class JournalStripe: Sendable {
    struct State: ~Copyable {
        /// The file this stripe appends to; nil until its first event (an
        /// idle stripe has no file) and after a purge.
        var segment: JournalSegment?
        /// The events' identity tail (`EventPayload`) as of
        /// `tailGeneration`: this stripe's own copy, so that building an
        /// event touches no buffer another thread's events use.
        var tail: [UInt8] = []
        var tailGeneration: UInt64 = 0
        /// Random bits for event ids (a refill, one getrandom, every 409 events).
        var random = RandomPool(size: 4096)
        /// The current millisecond's timestamp and id time, rendered.
        var stamp = EventStamp()
        /// The event being built, reused from one event to the next.
        var buffer = EventBuffer()
    }

    let state = Lock(State(), padded: true, level: LockClass.stripe)
    /// Records and their bytes (`RowCost`) appended to the current segment and not
    /// yet added to the journal's shared totals (`EventJournal.publish`).
    /// Changed only under the lock; read by anyone who needs the exact sum.
    let unpublishedRecords = Atomic<Int>(0)
    let unpublishedBytes = Atomic<Int>(0)
    private let padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
}

/// The journal's totals that stripes publish to, on cache lines of their own.
final class JournalTotals: Sendable {
    private let before: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
    let records = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    private let after: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
}

extension LockClass {
    /// `JournalStripe.state`: one `track`'s consent check and `write()` (one per stripe; a
    /// rotation takes them one at a time).
    static let stripe = LockClass(rank: 15, "JournalStripe.state")
}
