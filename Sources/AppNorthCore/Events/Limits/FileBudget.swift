/// How the byte limit (`maxQueuedBytes`, 5 MiB by default) holds for the
/// store's files, not only for the rows (#32): the database, its WAL and
/// every journal file together stay within it plus 5 % (measured in
/// `DiskBudgetTests`). The rows get the limit less a tenth (`rowBytes`),
/// counted at their cost in pages (`RowCost`); the tenth and the 5 % hold
/// what is not a row:
/// - the WAL: checkpointed every 256 pages while the rows (or the
///   database file, and a journal twice) take less than three quarters of
///   their share (as before: a 10,000-event flush of small events costs 51
///   `fdatasync`), every 64 pages and cut back to 256 KiB past it
///   (`walPages`, `QueueLimits.fitWAL`), so its peak is about 100 pages;
/// - a journal file while it drains holds what the table already has:
///   `track` counts its journal twice against the limits, so it drains
///   before the two copies could pass them; parts are at most
///   `EventImporter.importPartBytes`;
/// - the database's own pages (28 KiB), its pointer-map and interior
///   pages (about 1 %), and `track`'s 1 % of slack.
/// Below 1 MiB or so those fixed sizes are more than a tenth: a smaller
/// limit holds for the rows, and the files hold it plus about 0.5 MiB.
enum FileBudget {
    /// The rows' share of a byte limit.
    static func rowBytes(_ limit: Int) -> Int { max(0, limit) - max(0, limit) / 10 }

    /// The WAL's checkpoint interval in pages (and its size after a
    /// checkpoint: that many pages) for rows of `bytes` in a share of
    /// `rowLimit`.
    static func walPages(rows bytes: Int, rowLimit: Int) -> Int {
        bytes > rowLimit / 4 * 3 ? tightWALPages : roomyWALPages
    }
    static let roomyWALPages = 256
    static let tightWALPages = 64
}
