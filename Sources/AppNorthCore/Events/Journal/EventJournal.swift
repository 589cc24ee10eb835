import CSystem
import Glibc
import Synchronization

/// The hot-path half of the event queue: append-only journal files in the
/// data directory (`events-<pid>-<token>.journal`), one per stripe of each
/// handle.
///
/// `track` appends one record (`JournalRecord`) with one `writev` on an
/// `O_APPEND` descriptor. Once that returns, the bytes are in the kernel's
/// page cache: they outlive the process (SIGKILL, a crash), like a SQLite
/// commit in WAL mode with `synchronous=NORMAL`, and like it they are not
/// promised to outlive a power cut (docs/events.md, "Durability").
/// The upload thread drains journals into the SQLite `events` table.
///
/// Stripes: each thread appends to the stripe its thread slot picks
/// (`appnorth_thread_slot`, handed out round-robin), so up to
/// `stripeCount` threads track at once without meeting: not on a lock, not
/// on the kernel's per-file append lock (which alone keeps one shared file
/// from scaling past one thread), not on a shared counter. Counts go to
/// the shared totals in steps (see `EventStore.queuedAfterAppend`).
final class EventJournal: Sendable {
    static let prefix = "events-"
    static let suffix = ".journal"
    /// A journal being created: locked, then renamed to its final name, so
    /// that nobody can take an unlocked journal for a dead process's.
    static let creatingSuffix = ".journal.new"
    /// Stripes per handle: at most this many threads track without sharing
    /// a file; more share stripes (and then wait for each other's append,
    /// as they would in the kernel on one file).
    static let stripeCount = 8

    let directory: DataDirectory
    let stripes: [JournalStripe]
    /// Records and their bytes (`RowCost`) of segments not imported yet, as the
    /// stripes published them.
    let totals = JournalTotals()

    /// The consent revocation count (ConsentRecord) this handle has acted
    /// on, written into every new segment's name: an import re-checks it,
    /// so events journaled by a handle that had not yet seen a revocation
    /// are purged, never imported (EventStore.importJournal).
    let epoch: Atomic<Int64>

    /// The first half of every segment's 16-hex-digit token
    /// (`createSegment`): with the pid it tells this handle's files from
    /// another handle's or process's by name alone (`isOwn`), so the
    /// limits' look at the directory takes no lock. The format is unchanged.
    let handleToken = Random.hexToken(bytes: 4)
    /// `events-<pid>-r`: how this process's journal names start.
    let processPrefix = prefix + String(getpid()) + "-r"

    init(directory: DataDirectory, epoch: Int64) throws(AppNorthError) {
        self.directory = directory
        self.epoch = Atomic(epoch)
        stripes = (0..<Self.stripeCount).map { _ in JournalStripe() }
        stripeRefs = stripes.map { Unmanaged.passUnretained($0) }
        // The first stripe's file is made now: an open fails at once where
        // no journal can be made, and an idle handle has one file.
        let first = try Self.createSegment(in: directory, epoch: epoch, handle: handleToken)
        stripes[0].state.withLock { $0.segment = first }
    }

    /// `stripes`, for `track` to use without a retain and release of the
    /// stripe per event (two atomic writes); `stripes` keeps them alive.
    private let stripeRefs: [Unmanaged<JournalStripe>]

    /// The stripe the calling thread appends to, lent to `body`.
    @inline(__always)
    func withCurrentStripe<R>(_ body: (JournalStripe) throws(AppNorthError) -> R) throws(AppNorthError) -> R {
        try stripeRefs[Int(appnorth_thread_slot() % UInt32(Self.stripeCount))]._withUnsafeGuaranteedRef { stripe in
            Result { () throws(AppNorthError) in try body(stripe) }
        }.get()
    }

    /// Appends one record (the stripe's `buffer`) to its segment, made now
    /// when the stripe has none. Called with the stripe's lock held.
    func append(_ s: inout JournalStripe.State, of stripe: JournalStripe) throws(AppNorthError) {
        if s.segment == nil {
            s.segment = try Self.createSegment(in: directory, epoch: epoch.load(ordering: .acquiring), handle: handleToken)
        }
        // The segment is lent, not retained: `s` holds it under the lock,
        // and a retain and release are two atomic writes per event.
        let segment = Unmanaged.passUnretained(s.segment.unsafelyUnwrapped)
        let p = s.buffer.bytes
        let count = p.count
        try segment._withUnsafeGuaranteedRef { segment in
            Result { () throws(AppNorthError) in
                let (written, expected, error) = Self.writeRecord(segment.fd, p)
                guard written == expected else {
                    // A short write leaves a torn record that the decoder skips;
                    // later records go to a fresh file once this one is rotated out.
                    segment.failed.store(true, ordering: .relaxed)
                    let reason = written < 0 ? String(cString: strerror(error)) : "short write (\(written) of \(expected) bytes)"
                    throw .storage("cannot append to the event journal \(segment.path): \(reason)")
                }
                Self.count(record: RowCost.bytes(payload: count), in: segment, stripe)
            }
        }.get()
    }

    /// One record (header and `payload`) with one `writev`: what it
    /// returned, the size expected and errno.
    @inline(__always)
    private static func writeRecord(_ fd: Int32, _ p: UnsafeRawBufferPointer) -> (Int, Int, Int32) {
        var header = JournalRecord.header(for: p)
        let expected = MemoryLayout.size(ofValue: header) + p.count
        return withUnsafeMutableBytes(of: &header) { h -> (Int, Int, Int32) in
            var parts = (iovec(iov_base: h.baseAddress, iov_len: h.count),
                         iovec(iov_base: UnsafeMutableRawPointer(mutating: p.baseAddress), iov_len: p.count))
            return withUnsafeMutablePointer(to: &parts) { pointer in
                pointer.withMemoryRebound(to: iovec.self, capacity: 2) { iov -> (Int, Int, Int32) in
                    while true {
                        let n = writev(fd, iov, 2)
                        if n < 0 && errno == EINTR { continue }
                        return (n, expected, n < 0 ? errno : 0)
                    }
                }
            }
        }
    }

    /// Counts a record written whole. Only this stripe's lock holder
    /// writes these: no read-modify-write.
    @inline(__always)
    private static func count(record bytes: Int, in segment: JournalSegment, _ stripe: JournalStripe) {
        segment.records.store(segment.records.load(ordering: .relaxed) + 1, ordering: .releasing)
        segment.bytes.store(segment.bytes.load(ordering: .relaxed) + bytes, ordering: .releasing)
        stripe.unpublishedRecords.store(stripe.unpublishedRecords.load(ordering: .relaxed) + 1, ordering: .relaxed)
        stripe.unpublishedBytes.store(stripe.unpublishedBytes.load(ordering: .relaxed) + bytes, ordering: .relaxed)
    }

    /// Adds a stripe's unpublished counts to the totals. Called with the
    /// stripe's lock held.
    func publish(_ stripe: JournalStripe) {
        let records = stripe.unpublishedRecords.load(ordering: .relaxed)
        let bytes = stripe.unpublishedBytes.load(ordering: .relaxed)
        guard records != 0 || bytes != 0 else { return }
        totals.records.add(records, ordering: .relaxed)
        totals.bytes.add(bytes, ordering: .relaxed)
        stripe.unpublishedRecords.store(0, ordering: .relaxed)
        stripe.unpublishedBytes.store(0, ordering: .relaxed)
    }

    /// Records and their bytes (`RowCost`) in segments not imported yet: the totals
    /// plus what every stripe has not published.
    var pending: (records: Int, bytes: Int) {
        var records = totals.records.load(ordering: .relaxed), bytes = totals.bytes.load(ordering: .relaxed)
        for stripe in stripes {
            records += stripe.unpublishedRecords.load(ordering: .relaxed)
            bytes += stripe.unpublishedBytes.load(ordering: .relaxed)
        }
        return (records, bytes)
    }

    /// Takes every segment that is used (records, or a failed write) or
    /// carries an older consent epoch than the journal's out of its stripe
    /// and appends it to `retired`. With `fresh`, a new file takes its
    /// place (made before the stripe is locked, so `track` does not wait
    /// for it); without (a purge), the stripe's next event makes one. The
    /// segments already taken stay in `retired` when making a file fails.
    func rotate(into retired: inout [JournalSegment], fresh: Bool) throws(AppNorthError) {
        var failure: AppNorthError?
        let epoch = self.epoch.load(ordering: .acquiring)
        func due(_ segment: JournalSegment?) -> Bool {
            guard let segment else { return false }
            return segment.isUsed || segment.epoch != epoch
        }
        for stripe in stripes {
            var replacement: JournalSegment?
            if fresh {
                guard stripe.state.withLock({ due($0.segment) }) else { continue }
                do throws(AppNorthError) {
                    replacement = try Self.createSegment(in: directory, epoch: epoch, handle: handleToken)
                } catch {
                    failure = error
                    continue
                }
            }
            // Decided again under the lock: a write that held it while the
            // check above ran (or, in a purge, a write that passed its
            // consent check) is in the segment taken here.
            let old = stripe.state.withLock { s -> JournalSegment? in
                guard let current = s.segment, due(current) else { return nil }
                s.segment = replacement
                publish(stripe)
                return current
            }
            if let old {
                retired.append(old)
            } else if let replacement {
                directory.remove(replacement.name)
            }
        }
        if let failure { throw failure }
    }

    /// Forgets a segment's records (imported or purged), or the rest of
    /// them after a part was settled.
    func settle(_ segment: JournalSegment) {
        settle(segment, records: .max, bytes: .max)
    }

    /// Forgets `records` and `bytes` of a segment (a part imported), never
    /// more than it holds unsettled: a file read back may hold records
    /// its counters do not (damage), and those were never counted.
    func settle(_ segment: JournalSegment, records: Int, bytes: Int) {
        let leftRecords = max(0, segment.records.load(ordering: .acquiring) - segment.settledRecords.load(ordering: .relaxed))
        let leftBytes = max(0, segment.bytes.load(ordering: .acquiring) - segment.settledBytes.load(ordering: .relaxed))
        let r = min(max(0, records), leftRecords), b = min(max(0, bytes), leftBytes)
        segment.settledRecords.add(r, ordering: .relaxed)
        segment.settledBytes.add(b, ordering: .relaxed)
        totals.records.subtract(r, ordering: .relaxed)
        totals.bytes.subtract(b, ordering: .relaxed)
    }

    /// Records of a segment not settled yet.
    func unsettledRecords(_ segment: JournalSegment) -> Int {
        max(0, segment.records.load(ordering: .acquiring) - segment.settledRecords.load(ordering: .relaxed))
    }

    // MARK: Files

    /// Creates and locks a journal under a temporary name, then renames it
    /// into place (see `creatingSuffix`). A recovery that removes the
    /// temporary file in between makes the rename fail: then try again.
    static func createSegment(in directory: DataDirectory, epoch: Int64, handle: String) throws(AppNorthError) -> JournalSegment {
        var lastError = ""
        for _ in 0..<4 {
            let name = prefix + String(getpid()) + "-r" + String(epoch) + "-" + handle + Random.hexToken(bytes: 4) + suffix
            let temporary = name + ".new"
            let fd = directory.createNew(temporary, appending: true)
            guard fd >= 0 else {
                lastError = String(cString: strerror(errno))
                continue
            }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 && directory.rename(temporary, to: name) {
                return JournalSegment(name: name, path: directory.file(name), fd: fd, epoch: epoch)
            }
            lastError = String(cString: strerror(errno))
            directory.remove(temporary)
            close(fd)
        }
        throw .storage("cannot create an event journal in \(directory.path): \(lastError)")
    }

    /// Whether a journal's name is one this handle made: its pid, and its
    /// token starting with `handleToken`.
    func isOwn(_ name: String) -> Bool {
        let utf8 = name.utf8, end = utf8.count - Self.suffix.utf8.count
        guard end >= 16, name.hasPrefix(processPrefix) else { return false }
        return utf8.dropFirst(end - 16).prefix(8).elementsEqual(handleToken.utf8)
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

    /// What an ended process's journal too large for the limits is
    /// renamed to end with (`EventStore.setAside`).
    static let asideSuffix = ".aside"

    /// The largest journal file the queue's limits allow: twice the
    /// records they admit (payload bytes, plus a header and an id per
    /// event) and one largest record, at most 2 GiB. A journal a process
    /// wrote under those limits stays below it unless it tracked more than
    /// twice the limits between two drains.
    static func largestFile(maxEvents: Int, maxBytes: Int) -> Int {
        let records = maxBytes.addingSaturating(maxEvents.multipliedSaturating(by: JournalRecord.headerSize))
        return min(2 << 30, records.multipliedSaturating(by: 2).addingSaturating(JournalRecord.headerSize + JournalRecord.maxPayload))
    }

    /// A journal that no live process holds, opened and locked; nil when
    /// its owner is alive (it holds the lock) or it is gone.
    static func claimOrphan(_ name: String, in directory: DataDirectory, logger: Logger) -> Int32? {
        let fd: Int32
        do throws(AppNorthError) {
            // Only a regular file of the effective uid: a link, or a
            // journal another user forged (its checksums are no MAC), is
            // never imported nor uploaded with this user's credential.
            guard let opened = try directory.openExisting(name, writable: true) else { return nil }
            fd = opened
        } catch {
            logger.log(.warning, "event queue: \(error.message)")
            return nil
        }
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
        let ending = creating ? Self.creatingSuffix : Self.suffix
        return directory.names { $0.hasPrefix(Self.prefix) && $0.hasSuffix(ending) }
    }
}
