/// What one queued event costs in the store's files, estimated from its
/// payload's length alone so that the limits stay counters (#32): the
/// `events` row's pages at SQLite's 4 KiB page (`SQLiteStore.pageSize`),
/// by SQLite's own overflow arithmetic (the file format's "cell payload
/// overflow pages"), plus its `id` index entry. The queue's byte limit
/// counts this, not the payload: 10 KB events take three pages each, 12.3
/// KB, which payload bytes undercounted by a fifth.
enum RowCost {
    static let page = SQLiteStore.pageSize
    /// A leaf page's room for cells (its 8-byte header off).
    static let leafRoom = page - 8
    /// The record beside the payload: its header, the 36-character id and
    /// the `bytes` integer.
    static let recordOverhead = 45
    /// A cell's size varints, overflow page number and pointer.
    static let cellOverhead = 11
    /// The `id` index's entry (the id and the rowid, with its cell).
    static let indexEntry = 48

    /// The bytes of the files one event of `payload` bytes takes as a
    /// row: its leaf share (rows of one size fill a leaf with as many as
    /// fit), its overflow pages, its index entry.
    @inline(__always)
    static func bytes(payload: Int) -> Int {
        let record = max(0, payload) + recordOverhead
        // SQLite's table-leaf limits: X = U - 35, M = (U - 12) * 32 / 255 - 23.
        let most = page - 35, least = (page - 12) * 32 / 255 - 23
        var local = record, overflow = 0
        if record > most {
            let kept = least + (record - least) % (page - 4)
            local = kept <= most ? kept : least
            overflow = (record - local + page - 5) / (page - 4)
        }
        let perLeaf = max(1, leafRoom / (local + cellOverhead))
        return page / perLeaf + overflow * page + indexEntry
    }
}
