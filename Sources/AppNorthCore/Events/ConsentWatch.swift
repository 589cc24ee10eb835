import CSystem
import Glibc
import Synchronization

/// Carries a consent change from the handle that made it to every other
/// handle on the data directory, in this process or another.
///
/// The stored choice (`ConsentRecord`, SQLite) is the truth; this is the
/// doorbell. `consent.watch` in the data directory holds two 64-bit
/// counters, mapped `MAP_SHARED` by every handle: one moves on every
/// change, one on every revocation. Reading them costs `track` one load
/// (no syscall, no SQLite); a handle that finds the first moved reads the
/// stored choice and adopts it (AppNorthEvents.adoptSharedConsent).
///
/// The same file's `flock` fences uploads: each upload attempt holds it
/// shared from its last check of the revocation counter until its response,
/// and a revocation takes it exclusive once it has moved the counter, so
/// it returns only after every attempt that could carry older events has
/// been answered, and no later attempt passes the check.
final class ConsentWatch: Sendable {
    static let fileName = "consent.watch"
    private static let wordCount = 2

    private let directory: DataDirectory
    private let fd: Int32
    /// The two counters in the shared mapping (changes, revocations). Only
    /// this library writes the file, and only ever grows it.
    nonisolated(unsafe) private let words: UnsafeMutablePointer<UInt64>
    /// The change counter as of this handle's last adoption.
    private let seen = Atomic<UInt64>(0)
    /// The fork generation that mapped it (see `deinit`).
    private let forkGeneration: UInt64

    init(directory: DataDirectory) throws(AppNorthError) {
        let path = directory.file(Self.fileName)
        // Never a link, nor a file another user planted (DataDirectory).
        let fd = try directory.openOrCreate(Self.fileName)
        let bytes = Self.wordCount * MemoryLayout<UInt64>.size
        var info = stat()
        // Only ever grown: ftruncate to the same size keeps what another
        // process wrote, and a shorter file is one nobody has written yet.
        guard fstat(fd, &info) == 0, info.st_size >= bytes || ftruncate(fd, off_t(bytes)) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .storage("cannot prepare \(path): \(reason)")
        }
        let mapped = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let mapped, mapped != MAP_FAILED else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .storage("cannot map \(path): \(reason)")
        }
        self.directory = directory
        self.fd = fd
        words = mapped.bindMemory(to: UInt64.self, capacity: Self.wordCount)
        forkGeneration = ForkGuard.generation
        ForkGuard.closeInChild(fd)
        seen.store(appnorth_shared_load(words), ordering: .relaxed)
    }

    deinit {
        // A forked child keeps the mapping but not the descriptor; only the
        // process that made them undoes them.
        guard forkGeneration == ForkGuard.generation else { return }
        munmap(words, Self.wordCount * MemoryLayout<UInt64>.size)
        ForkGuard.keepInChild(fd)
        close(fd)
    }

    // MARK: Counters

    /// True when some handle changed consent since this one last adopted
    /// the stored choice. Two loads: cheap enough for every `track`.
    var hasChanged: Bool { appnorth_shared_load(words) != seen.load(ordering: .relaxed) }

    /// The change counter now, read before the stored choice is.
    var changes: UInt64 { appnorth_shared_load(words) }

    /// Records that the stored choice as of `changes` has been adopted.
    func adopted(_ changes: UInt64) { seen.store(changes, ordering: .relaxed) }

    /// The revocation counter: an upload compares it with the value it read
    /// with its batch.
    var revocations: UInt64 { appnorth_shared_load(words + 1) }

    /// Rings the doorbell after the stored choice has changed (committed).
    func announce(revocation: Bool) {
        if revocation { _ = appnorth_shared_increment(words + 1) }
        _ = appnorth_shared_increment(words)
    }

    // MARK: The upload fence

    /// Runs one upload attempt holding the fence shared; `body` checks the
    /// revocation counter first, and sends only if it has not moved.
    func withUploadFence<T>(_ body: () -> T) -> T {
        let locked = Self.lock(fd, LOCK_SH)
        defer { if locked { _ = flock(fd, LOCK_UN) } }
        return body()
    }

    /// Waits until no upload attempt of any handle holds the fence, at most
    /// `timeoutMilliseconds`. False on timeout: a process stopped (SIGSTOP)
    /// in the middle of a request must not hang the revoking host.
    ///
    /// On a descriptor of its own: asking for the exclusive lock on the
    /// upload thread's descriptor would convert that thread's shared lock,
    /// and a failed conversion drops it.
    func waitForUploads(timeoutMilliseconds: Int) -> Bool {
        guard let own = try? directory.openExisting(Self.fileName) else { return false }
        defer { close(own) }
        var waitedMs = 0
        var stepMs = 1
        while true {
            if flock(own, LOCK_EX | LOCK_NB) == 0 {
                _ = flock(own, LOCK_UN)
                return true
            }
            guard errno == EWOULDBLOCK || errno == EINTR, waitedMs < timeoutMilliseconds else { return false }
            sleepMilliseconds(stepMs)
            waitedMs += stepMs
            stepMs = min(20, stepMs * 2)
        }
    }

    private static func lock(_ fd: Int32, _ operation: Int32) -> Bool {
        while true {
            if flock(fd, operation) == 0 { return true }
            if errno != EINTR { return false }
        }
    }
}

/// The stored consent rows (kv namespace "consent"): the choice, and how
/// many revocations the data directory has seen. Each journal segment is
/// named with the count it was opened under (EventJournal), and an import
/// into the table re-reads the count in its transaction: a segment from
/// before a revocation is purged, never imported, whichever process finds
/// it and however late.
enum ConsentRecord {
    static let namespace = Schema.Namespace.consent
    static let choiceKey = "analytics"
    static let revocationsKey = "revocations"

    /// The revocation count; 0 before the first. A damaged value reads as
    /// `Int64.max`, which counting never reaches (it wraps to 1 there).
    static func revocations(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> Int64 {
        guard let value = try conn.kvValue(namespace, revocationsKey) else { return 0 }
        return Int64(String(decoding: value, as: UTF8.self)).flatMap { $0 >= 0 ? $0 : nil } ?? Int64.max
    }

    /// The stored choice, nil when none was made; `.unknown` stands for a
    /// damaged row (the caller deletes it).
    static func choice(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> ConsentState? {
        guard let value = try conn.kvValue(namespace, choiceKey) else { return nil }
        switch value {
        case Array("granted".utf8): return .granted
        case Array("revoked".utf8): return .revoked
        default: return .unknown
        }
    }

    static func putChoice(_ conn: SQLiteStore.Connection, _ value: ConsentState, nowMs: Int64) throws(AppNorthError) {
        try put(conn, choiceKey, Array(value.name.utf8), nowMs)
    }

    /// Counts one more revocation; returns the new count.
    static func countRevocation(_ conn: SQLiteStore.Connection, nowMs: Int64) throws(AppNorthError) -> Int64 {
        let current = try revocations(conn)
        let next = current >= Int64.max - 1 ? 1 : current + 1
        try put(conn, revocationsKey, Array(String(next).utf8), nowMs)
        return next
    }

    private static func put(_ conn: SQLiteStore.Connection, _ key: String, _ value: [UInt8], _ nowMs: Int64) throws(AppNorthError) {
        try conn.kvPut(namespace, key, value, updatedMs: nowMs)
    }
}
