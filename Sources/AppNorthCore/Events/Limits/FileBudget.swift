/// How the byte limit (`maxQueuedBytes`, 5 MiB by default) holds for the
/// store's files, not only for the rows (#32): the database, its WAL and
/// every journal file together stay within it plus 5 % (measured in
/// `DiskBudgetTests`). The rows get the limit less a tenth (`rowBytes`),
/// counted at their cost in pages (`RowCost`); the tenth and the 5 % hold
/// what is not a row:
/// - the WAL: checkpointed every 256 pages while its peak fits beside what
///   the other files may hold until the next drain
///   (`filesUntilNextDrain`), every 64 pages and cut back to 256 KiB
///   otherwise (`walPages`, `QueueLimits.fitWAL`), so its peak is about
///   100 pages then;
/// - a journal file while it drains holds what the table already has:
///   `track` counts its journal twice (and the database file when larger
///   than the table) against the byte limit, and imports it before the two
///   copies could pass it; parts are at most `EventImporter.importPartBytes`;
/// - the database's own pages (28 KiB), its pointer-map and interior
///   pages (about 1 %), and `track`'s 1 % of slack.
/// Below 1 MiB or so those fixed sizes are more than a tenth: a smaller
/// limit holds for the rows, and the files hold it plus about 0.5 MiB.
enum FileBudget {
    /// The rows' share of a byte limit.
    static func rowBytes(_ limit: Int) -> Int { max(0, limit) - max(0, limit) / 10 }

    /// The rows' share (of a `rowBytes` share) a trim keeps while another
    /// handle or process writes beside this one (`QueueLimits.shared`):
    /// eight tenths of the limit. Two connections' commits leave the WAL at
    /// its interval and a transaction (0.5-0.6 MB measured, against 0.3-0.4
    /// for one), and both may import at once.
    static func sharedRowBytes(_ rowLimit: Int) -> Int { max(0, rowLimit) - max(0, rowLimit) / 9 }

    /// How much a handle journals, while the directory is shared, before
    /// its journal goes in (`EventTracker.keepFilesWithinLimit`): a
    /// sixteenth of the rows' share (288 KiB of 5 MiB). Another's journal
    /// shows to this handle only at its next look, and its copy goes in
    /// at its row cost (10 KB events: a fifth more than the file); two
    /// handles left to grow their journals to the files' bound imported
    /// both at once: 5.61 MB with 2.15 MB of journals (CI, 2 cores).
    static func sharedJournalBytes(_ rowLimit: Int) -> Int { max(0, rowLimit) / 16 }

    /// The WAL's checkpoint interval in pages (and its size after a
    /// checkpoint: that many pages) while the other files may hold `files`
    /// bytes, for rows of a `rowLimit` share: 256 while a roomy WAL's peak
    /// still fits in the budget (`rowLimit` and a sixth: the limit and 5 %).
    static func walPages(files: Int, rowLimit: Int) -> Int {
        files > rowLimit / 6 * 7 - roomyWALPeak ? tightWALPages : roomyWALPages
    }
    /// What the files but the WAL may hold while a drain imports
    /// `pending` bytes (this handle's journal, rotated out) into a table
    /// (or database file, when larger) of `base` bytes, until the next
    /// drain fits the WAL again: the table, the copy going in, and the
    /// journal files. Those stay whole until imported (`journals` on disk
    /// now, at least `pending`), and meanwhile `track` writes fresh ones
    /// until the database and every journal file twice pass the limit and
    /// its 1 % (`EventTracker.keepFilesWithinLimit`): up to half of what
    /// `base` leaves of it, on top of the copy. A bound that took the
    /// larger of the copy and that growth let a drain of 2.09 MB choose
    /// the roomy WAL while `track` wrote on: 5.61-5.73 MB (database 2.06
    /// MB, WAL 1.26 MB, journals 2.29-2.41 MB), 4 of 27 runs under load.
    static func filesUntilNextDrain(base: Int, journals: Int, pending: Int, rowLimit: Int) -> Int {
        let grows = max(0, (rowLimit + rowLimit / 100 - base) / 2)
        return base + pending + max(max(journals, pending), grows)
    }
    static let roomyWALPages = 256
    static let tightWALPages = 64
    /// 256 pages and an import part's (about 40), with the WAL's frame
    /// headers: 1.2-1.3 MB. (Taken at 352 pages, a flush of 10,000 small
    /// events, 3.4 MB of database, checkpointed every 64 pages all through:
    /// 254 `fdatasync` instead of 89.)
    static let roomyWALPeak = 320 * 4096
}
