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
/// The same mapping fences uploads without a lock: each upload attempt
/// registers in a slot (its process id and a tag) before its last check of
/// the revocation counter and clears it after its response; a revocation
/// moves the counter, then waits until every slot registered is clear, or
/// its process is gone. Both sides are sequentially consistent (a store,
/// then a load of the other word), so either the attempt sees the moved
/// counter and does not send, or the revocation sees its slot and waits:
/// it returns only after every attempt that could carry older events has
/// been answered, and no later attempt passes the check. Nothing is held
/// across the request: a process killed in the middle of one leaves a slot
/// that the next revocation finds dead and clears.
final class ConsentWatch: Sendable {
    static let fileName = "consent.watch"
    /// The two counters, then `slotCount` slots of uploads in flight: one
    /// page. (Libraries before the slots map the first 16 bytes only.)
    /// Then, on a second page no earlier library maps, the super
    /// properties' change counter (`SuperProperties`): 0.3 libraries map
    /// and write the first page only, and grow the file only when shorter.
    private static let slotCount = 510
    private static let superPropertiesWord = 512
    private static let wordCount = 1024

    private let directory: DataDirectory
    private let fd: Int32
    /// The two counters in the shared mapping (changes, revocations), then
    /// the upload slots. Only this library writes the file, and only ever
    /// grows it.
    nonisolated(unsafe) private let words: UnsafeMutablePointer<UInt64>
    /// The change counter as of this handle's last adoption.
    private let seen = Atomic<UInt64>(0)
    /// The fork generation that mapped it (see `deinit`).
    private let forkGeneration: UInt64
    /// This handle's part of its slot's value (the low 32 bits, never 0).
    private let tag = UInt64(UInt32.random(in: 1...UInt32.max))

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
    var revocations: UInt64 { appnorth_shared_load_seq_cst(words + 1) }

    /// Rings the doorbell after the stored choice has changed (committed).
    func announce(revocation: Bool) {
        if revocation { _ = appnorth_shared_increment(words + 1) }
        _ = appnorth_shared_increment(words)
    }

    /// The super properties' change counter: moves after every change
    /// to `super_properties.json` (`SuperProperties`), in any handle or
    /// process. One load.
    var superPropertiesChanges: UInt64 { appnorth_shared_load(words + Self.superPropertiesWord) }

    /// Rings it after the file was replaced.
    func announceSuperPropertiesChange() { _ = appnorth_shared_increment(words + Self.superPropertiesWord) }

    // MARK: The upload fence

    /// One upload attempt registered in a slot, from before its revocation
    /// check until `end()`, once its answer is in: a revoking handle waits
    /// for it (`waitForUploads`). Used on the upload thread only.
    struct UploadRegistration {
        fileprivate let slot: UnsafeMutablePointer<UInt64>
        fileprivate let value: UInt64

        func end() { _ = appnorth_shared_compare_exchange(slot, value, 0) }
    }

    /// Registers one upload attempt in a slot; the caller then checks the
    /// revocation counter (`EventConsent.beginAttempt`) and sends only if it
    /// has not moved. Nil when no slot came free within about a second (510
    /// attempts in flight on one directory): the attempt does not go.
    func registerUpload() -> UploadRegistration? {
        let value = UInt64(UInt32(truncatingIfNeeded: getpid())) << 32 | tag
        return claimSlot(value).map { UploadRegistration(slot: $0, value: value) }
    }

    /// A free slot (or one whose process is gone), now holding `value`.
    private func claimSlot(_ value: UInt64) -> UnsafeMutablePointer<UInt64>? {
        for round in 0..<50 {
            for index in 0..<Self.slotCount {
                let slot = words + 2 + index
                let seen = appnorth_shared_load_seq_cst(slot)
                if seen == 0 || (round > 0 && !Self.isAlive(seen)) {
                    if appnorth_shared_compare_exchange(slot, seen, value) { return slot }
                }
            }
            sleepMilliseconds(20)
        }
        return nil
    }

    /// Whether the process of a slot's value still runs (kill(pid, 0)).
    private static func isAlive(_ value: UInt64) -> Bool {
        let pid = pid_t(truncatingIfNeeded: value >> 32)
        return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH)
    }

    /// Waits until no upload attempt of any handle is registered (a slot of
    /// a process that is gone is cleared), at most `timeoutMilliseconds`.
    /// False on timeout: a process stopped (SIGSTOP) in the middle of a
    /// request must not hang the revoking host. Then also waits for the
    /// shared `flock` that libraries before the slots hold across an
    /// attempt, on a descriptor of its own.
    func waitForUploads(timeoutMilliseconds: Int) -> Bool {
        var waitedMs = 0
        var stepMs = 1
        func step() -> Bool {
            guard waitedMs < timeoutMilliseconds else { return false }
            sleepMilliseconds(stepMs)
            waitedMs += stepMs
            stepMs = min(20, stepMs * 2)
            return true
        }
        while !slotsClear() {
            guard step() else { return false }
        }
        guard let own = try? directory.openExisting(Self.fileName) else { return false }
        defer { close(own) }
        while flock(own, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, step() else { return false }
        }
        _ = flock(own, LOCK_UN)
        return true
    }

    /// True when no slot holds an attempt of a live process; clears the
    /// slots of processes that are gone.
    private func slotsClear() -> Bool {
        var clear = true
        for index in 0..<Self.slotCount {
            let slot = words + 2 + index
            let seen = appnorth_shared_load_seq_cst(slot)
            guard seen != 0 else { continue }
            if Self.isAlive(seen) {
                clear = false
            } else {
                _ = appnorth_shared_compare_exchange(slot, seen, 0)
            }
        }
        return clear
    }

    /// The slots in use (for tests).
    var uploadsRegistered: Int {
        (0..<Self.slotCount).reduce(0) { $0 + (appnorth_shared_load_seq_cst(words + 2 + $1) == 0 ? 0 : 1) }
    }

    /// Registers an attempt of `pid` as a dead or stopped process leaves it (for tests).
    func occupySlotForTesting(pid: pid_t) -> Bool {
        claimSlot(UInt64(UInt32(truncatingIfNeeded: pid)) << 32 | 1) != nil
    }

    /// Clears the slots of `pid` (for tests).
    func clearSlotsForTesting(pid: pid_t) {
        for index in 0..<Self.slotCount where appnorth_shared_load_seq_cst(words + 2 + index) >> 32 == UInt64(UInt32(truncatingIfNeeded: pid)) {
            appnorth_shared_store_seq_cst(words + 2 + index, 0)
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
