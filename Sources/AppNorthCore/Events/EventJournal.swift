import Glibc
import Synchronization

/// One journal file: `track` appends records to it until the drain
/// rotates it out, imports it into SQLite and deletes it.
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
    /// `track` calls that took this segment and have not finished writing.
    let writers = Atomic<Int>(0)
    /// Records and payload bytes written whole.
    let records = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    /// A write failed or was short: rotate the file out at the next drain.
    let failed = Atomic<Bool>(false)
    /// The fork generation the descriptor belongs to (see `deinit`).
    private let generation: UInt64

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

    var isIdle: Bool { writers.load(ordering: .acquiring) == 0 }

    /// Everything in the file, read from its start.
    func contents() throws(AppNorthError) -> [UInt8] {
        try EventJournal.readAll(fd, path)
    }
}

/// The hot-path half of the event queue: per-process append-only journal
/// files in the data directory (`events-<pid>-<token>.journal`).
///
/// `track` appends one record (`JournalRecord`) with one `writev` on an
/// `O_APPEND` descriptor. Once that returns, the bytes are in the kernel's
/// page cache: they outlive the process (SIGKILL, a crash), like a SQLite
/// commit in WAL mode with `synchronous=NORMAL`, and like it they are not
/// promised to outlive a power cut (docs/events.md, "Durability").
/// The upload thread drains journals into the SQLite `events` table.
final class EventJournal: Sendable {
    static let prefix = "events-"
    static let suffix = ".journal"
    /// A journal being created: locked, then renamed to its final name, so
    /// that nobody can take an unlocked journal for a dead process's.
    static let creatingSuffix = ".journal.new"

    let directory: DataDirectory
    private let current: Lock<JournalSegment>
    /// Records and payload bytes written to segments not yet imported.
    let pendingRecords = Atomic<Int>(0)
    let pendingBytes = Atomic<Int>(0)

    /// The consent revocation count (ConsentRecord) this handle has acted
    /// on, written into every new segment's name: an import re-checks it,
    /// so events journaled by a handle that had not yet seen a revocation
    /// are purged, never imported (EventStore.importJournal).
    let epoch: Atomic<Int64>

    init(directory: DataDirectory, epoch: Int64) throws(AppNorthError) {
        self.directory = directory
        self.epoch = Atomic(epoch)
        current = Lock(try Self.createSegment(in: directory, epoch: epoch))
    }

    /// The segment the caller's next record goes to, counted as written to
    /// until `append` returns. Called under the events' state lock with the
    /// consent check, so that a revocation (which rotates after flipping the
    /// state) finds every racing write in the segment it purges.
    func enter() -> JournalSegment {
        current.withLock { segment in
            segment.writers.add(1, ordering: .acquiringAndReleasing)
            return segment
        }
    }

    /// Leaves a segment taken by `enter` without writing to it.
    func leave(_ segment: JournalSegment) {
        segment.writers.subtract(1, ordering: .releasing)
    }

    /// Appends one record to `segment` (from `enter`) and leaves it.
    func append(_ payload: [UInt8], to segment: JournalSegment) throws(AppNorthError) {
        defer { leave(segment) }
        let (written, expected, error) = payload.withUnsafeBytes { p -> (Int, Int, Int32) in
            var header = JournalRecord.header(for: p)
            return withUnsafeMutableBytes(of: &header) { h -> (Int, Int, Int32) in
                var parts = (iovec(iov_base: h.baseAddress, iov_len: h.count),
                             iovec(iov_base: UnsafeMutableRawPointer(mutating: p.baseAddress), iov_len: p.count))
                let expected = h.count + p.count
                return withUnsafeMutablePointer(to: &parts) { pointer in
                    pointer.withMemoryRebound(to: iovec.self, capacity: 2) { iov -> (Int, Int, Int32) in
                        while true {
                            let n = writev(segment.fd, iov, 2)
                            if n < 0 && errno == EINTR { continue }
                            return (n, expected, n < 0 ? errno : 0)
                        }
                    }
                }
            }
        }
        guard written == expected else {
            // A short write leaves a torn record that the decoder skips;
            // later records go to a fresh file once this one is rotated out.
            segment.failed.store(true, ordering: .relaxed)
            let reason = written < 0 ? String(cString: strerror(error)) : "short write (\(written) of \(expected) bytes)"
            throw .storage("cannot append to the event journal \(segment.path): \(reason)")
        }
        segment.records.add(1, ordering: .relaxed)
        segment.bytes.add(payload.count, ordering: .relaxed)
        pendingRecords.add(1, ordering: .relaxed)
        pendingBytes.add(payload.count, ordering: .relaxed)
    }

    /// Swaps in a fresh segment when the current one has records, writers,
    /// a failed write or an older consent epoch, and returns the old one;
    /// nil when it is untouched.
    func rotate() throws(AppNorthError) -> JournalSegment? {
        let segment = current.withLock { $0 }
        let epoch = self.epoch.load(ordering: .acquiring)
        guard segment.records.load(ordering: .acquiring) > 0 || !segment.isIdle
                || segment.failed.load(ordering: .relaxed) || segment.epoch != epoch else { return nil }
        let fresh = try Self.createSegment(in: directory, epoch: epoch)
        return current.withLock { segment in
            let old = segment
            segment = fresh
            return old
        }
    }

    /// Forgets a segment's records (imported or purged).
    func settle(_ segment: JournalSegment) {
        pendingRecords.subtract(segment.records.load(ordering: .acquiring), ordering: .relaxed)
        pendingBytes.subtract(segment.bytes.load(ordering: .acquiring), ordering: .relaxed)
    }

    // MARK: Files

    /// Creates and locks a journal under a temporary name, then renames it
    /// into place (see `creatingSuffix`). A recovery that removes the
    /// temporary file in between makes the rename fail: then try again.
    static func createSegment(in directory: DataDirectory, epoch: Int64) throws(AppNorthError) -> JournalSegment {
        var lastError = ""
        for _ in 0..<4 {
            let name = prefix + String(getpid()) + "-r" + String(epoch) + "-" + Random.hexToken(bytes: 8) + suffix
            let path = directory.file(name)
            let temporary = path + ".new"
            let fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                lastError = String(cString: strerror(errno))
                continue
            }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 && rename(temporary, path) == 0 {
                return JournalSegment(name: name, path: path, fd: fd, epoch: epoch)
            }
            lastError = String(cString: strerror(errno))
            unlink(temporary)
            close(fd)
        }
        throw .storage("cannot create an event journal in \(directory.path): \(lastError)")
    }

    /// The consent epoch a journal's name carries
    /// (`events-<pid>-r<epoch>-<token>.journal`); 0 for names from before
    /// epochs (`events-<pid>-<token>.journal`), nil for any other name.
    static func epoch(ofName name: String) -> Int64? {
        guard name.hasPrefix(prefix) && name.hasSuffix(suffix) else { return nil }
        let parts = name.dropFirst(prefix.count).dropLast(suffix.count).split(separator: "-", omittingEmptySubsequences: false)
        if parts.count == 2 { return 0 }
        guard parts.count == 3, parts[1].first == "r" else { return nil }
        return Int64(parts[1].dropFirst())
    }

    /// The largest journal file read: above the largest queue limit
    /// (1 GiB) with its slack and record headers. A bigger file cannot be
    /// one this library wrote, and reading it whole could exhaust memory.
    static let maxFileBytes = 2 << 30

    /// Reads a whole file from its start.
    static func readAll(_ fd: Int32, _ path: String) throws(AppNorthError) -> [UInt8] {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .storage("cannot read the event journal \(path): \(String(cString: strerror(errno)))") }
        guard info.st_size <= maxFileBytes else {
            throw .storage("the event journal \(path) is \(info.st_size) bytes, more than any journal holds (\(maxFileBytes)); left in place")
        }
        var out = [UInt8](repeating: 0, count: max(0, Int(info.st_size)))
        var filled = 0
        while filled < out.count {
            let n = out.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return pread(fd, base + filled, buffer.count - filled, off_t(filled))
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .storage("cannot read the event journal \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }  // the file shrank meanwhile
            filled += n
        }
        if filled < out.count { out.removeSubrange(filled...) }
        return out
    }

    /// A journal that no live process holds, opened and locked; nil when
    /// its owner is alive (it holds the lock) or it is gone.
    static func claimOrphan(_ path: String) -> Int32? {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        // Another process may have imported and removed it while this one
        // waited for the lock: a removed file has no links left.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &info) == 0, info.st_nlink > 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// The names in the data directory that are journals (`creating`:
    /// half-created ones instead).
    func journalNames(creating: Bool = false) -> [String] {
        guard let dir = opendir(directory.path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        let ending = creating ? Self.creatingSuffix : Self.suffix
        // The name is read in place up to its NUL (copying the whole
        // d_name array would read the bytes past it, which are undefined).
        guard let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name) else { return [] }
        while let entry = readdir(dir) {
            let name = String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
            if name.hasPrefix(Self.prefix) && name.hasSuffix(ending) { names.append(name) }
        }
        return names
    }
}
