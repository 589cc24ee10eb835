import CSystem
import Glibc
import Synchronization

/// One journal file: a stripe's `track` calls append records to it until
/// a drain rotates it out, imports it into SQLite and deletes it.
///
/// The process holds an exclusive `flock` on it for its whole life, which
/// is how other processes tell a live journal from one a dead process left
/// (the kernel drops the lock when the process dies, however it dies).
final class JournalSegment: Sendable {
    let name: String
    let path: String
    let fd: Int32
    /// The consent epoch in its name (EventJournal.epoch).
    let epoch: Int64
    /// Records and their bytes (`RowCost`) written whole. Written only under the
    /// stripe's lock (so a load and a store, no read-modify-write), read
    /// by drains.
    let records = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    /// A write failed or was short: rotate the file out at the next drain.
    let failed = Atomic<Bool>(false)
    /// Of `records` and `bytes`, what imports of a part of the file (once
    /// it is rotated out) have already taken off the journal's totals.
    /// Written under the store's drain lock.
    let settledRecords = Atomic<Int>(0)
    let settledBytes = Atomic<Int>(0)
    /// The fork generation the descriptor belongs to (see `deinit`).
    private let generation: UInt64
    /// Keeps the next heap block, often another stripe's segment, off the
    /// counters' cache line.
    private let padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)

    init(name: String, path: String, fd: Int32, epoch: Int64) {
        self.name = name
        self.path = path
        self.fd = fd
        self.epoch = epoch
        generation = ForkGuard.generation
        ForkGuard.closeInChild(fd)
    }

    deinit {
        // A forked child has already closed its copy (and the number may
        // have been reused since): only the process that opened it closes it.
        guard generation == ForkGuard.generation else { return }
        ForkGuard.keepInChild(fd)
        close(fd)
    }

    /// Holds records, or a write to it failed: a drain rotates it out.
    var isUsed: Bool { records.load(ordering: .acquiring) > 0 || failed.load(ordering: .relaxed) }

    /// A reader of the file, a window at a time.
    func reader() throws(AppNorthError) -> JournalReader {
        try JournalReader(fd: fd, path: path)
    }
}
