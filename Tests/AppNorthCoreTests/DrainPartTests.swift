import XCTest
import Glibc
@testable import AppNorthCore

/// The upload cycle's drain, a part at a time (`EventStore.drainPart`):
/// order, exact counts, limits, a revocation between parts, and a crash
/// between parts. On the store itself: no server needed.
final class DrainPartTests: XCTestCase {
    var folder = ""
    static let firstMs: Int64 = 1_700_000_000_000

    override func setUp() {
        folder = "/tmp/appnorth-drainpart-\(getpid())-\(Random.hexToken(bytes: 4))"
    }

    override func tearDown() {
        _ = system("rm -rf '\(folder)'")
    }

    func openStore() throws -> (EventStore, SQLiteStore) {
        let directory = try DataDirectory(path: folder)
        let db = try SQLiteStore(directory: directory)
        return (try EventStore(db: db, directory: directory, epoch: 0), db)
    }

    /// Journals events named `e<i>` (ids at `firstMs + i` ms) into the
    /// stripe `stripe`, as `track` does.
    func journal(_ store: EventStore, _ indexes: some Sequence<Int>, stripe index: Int = 0) throws {
        try store.journalForTests(indexes, firstMs: Self.firstMs, stripe: index)
    }

    /// The table's event names, oldest first.
    func tableNames(_ store: EventStore) throws -> [String] {
        try store.oldest(100_000).map { (try? JSON.parse(String(decoding: $0.payload, as: UTF8.self)))?["name"]?.stringValue ?? "?" }
    }

    func progressMarks(_ db: SQLiteStore) throws -> [String] {
        try db.withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT key FROM kv WHERE namespace = ?", [.text(EventImporter.progressNamespace)]) { $0.text(0) }
        }
    }

    func journalFileCount() -> Int {
        guard let dir = opendir(folder) else { return 0 }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(EventJournal.suffix) { count += 1 }
        }
        return count
    }

    func testPartsKeepTheOrderAcrossStripesAndTheCountsExact() throws {
        let (store, db) = try openStore()
        // Two stripes holding interleaved moments: even ones in one, odd in the other.
        try journal(store, stride(from: 0, to: 1000, by: 2), stripe: 0)
        try journal(store, stride(from: 1, to: 1000, by: 2), stripe: 1)
        let bytes = store.bytes
        XCTAssertEqual(store.count, 1000)
        try store.drainPart(256)
        XCTAssertEqual(try tableNames(store), (0..<256).map { "e\($0)" }, "the oldest 256 of both files, merged")
        XCTAssertEqual(store.count, 1000)
        XCTAssertEqual(store.journaled, 744)
        XCTAssertEqual(store.bytes, bytes)
        XCTAssertTrue(store.hasRetiredRest)
        XCTAssertEqual(Set(try progressMarks(db)).count, 2, "each file's progress is marked")
        // Events tracked meanwhile wait for the older files' rest.
        try journal(store, 1000..<1010, stripe: 0)
        var parts = 1
        while store.hasRetiredRest && parts < 10 {
            try store.drainPart(256)
            parts += 1
            XCTAssertEqual(store.count, 1010)
            XCTAssertEqual(store.count - store.journaled, try tableNames(store).count)
        }
        XCTAssertEqual(parts, 4)
        XCTAssertEqual(try tableNames(store), (0..<1000).map { "e\($0)" }, "the newer file is not rotated in before the rest")
        XCTAssertEqual(try progressMarks(db), [], "a file imported whole has no progress mark")
        try store.drainPart(256)
        XCTAssertEqual(try tableNames(store), (0..<1010).map { "e\($0)" })
        XCTAssertEqual(store.journaled, 0)
        XCTAssertEqual(store.count, 1010)
    }

    func testAFullDrainImportsTheRestOfAPart() throws {
        let (store, _) = try openStore()
        try journal(store, 0..<600)
        try store.drainPart(256)
        try journal(store, 600..<620, stripe: 3)
        try store.drain()
        XCTAssertFalse(store.hasRetiredRest)
        XCTAssertEqual(try tableNames(store), (0..<620).map { "e\($0)" })
        XCTAssertEqual(store.journaled, 0)
        XCTAssertEqual(journalFileCount(), 2, "the imported files are gone; fresh ones for the two stripes remain")
    }

    func testPastALimitThePartDrainImportsAllAndDropsTheOldest() throws {
        let (store, _) = try openStore()
        try journal(store, 0..<1000)
        XCTAssertEqual(try store.drainPart(256, trimmingTo: (500, 1 << 30)), 500)
        XCTAssertEqual(store.count, 500)
        XCTAssertEqual(store.limits.dropped.count, 500)
        XCTAssertEqual(try tableNames(store), (500..<1000).map { "e\($0)" })
        // Within the limits, a part again.
        try journal(store, 1000..<1400)
        XCTAssertEqual(try store.drainPart(256, trimmingTo: (10_000, 1 << 30)), 0)
        XCTAssertEqual(store.count, 900)
        XCTAssertEqual(store.journaled, 144)
    }

    func testARevocationBetweenPartsPurgesTheRest() throws {
        let (store, db) = try openStore()
        try journal(store, 0..<700)
        try store.drainPart(256)
        XCTAssertEqual(try store.revoke(nowMs: 1), 700, "the table's 256 and the journal's rest")
        XCTAssertEqual(store.count, 0)
        XCTAssertEqual(store.bytes, 0)
        XCTAssertFalse(store.hasRetiredRest)
        XCTAssertEqual(journalFileCount(), 0)
        // Its progress mark goes with the next import.
        try journal(store, 0..<3)
        try store.drainPart(256)
        XCTAssertEqual(try progressMarks(db), [])
        XCTAssertEqual(try tableNames(store), ["e0", "e1", "e2"])
    }

    func testACrashBetweenPartsImportsTheRestExactlyOnce() throws {
        var (store, db) = try openStore()
        try journal(store, 0..<1000)
        try store.drainPart(256)
        try store.drainPart(256)
        XCTAssertEqual(try tableNames(store).count, 512)
        // Uploaded and deleted: a second import of them would show.
        XCTAssertEqual(try store.remove(store.oldest(512)), 512)
        // The process "dies": its store is never closed (no last drain),
        // and the kernel drops its locks (here: its journal descriptors).
        let dead = Unmanaged.passRetained(store)
        for stripe in store.journal.stripes {
            if let segment = stripe.state.withLock({ $0.segment }) { close(segment.fd) }
        }
        XCTAssertEqual(store.retiredSegments.count, 1)
        for segment in store.retiredSegments { close(segment.fd) }
        _ = dead
        (store, db) = try openStore()
        XCTAssertEqual(try tableNames(store), (512..<1000).map { "e\($0)" }, "the rest, once")
        XCTAssertEqual(store.count, 488)
        XCTAssertEqual(try progressMarks(db), [])
    }

    func testAnOrphanWithAProgressMarkImportsOnlyTheRest() throws {
        let directory = try DataDirectory(path: folder)
        let name = "events-999999-r0-0123456789abcdef.journal"
        var bytes: [UInt8] = []
        var offsets: [Int] = []
        for i in 0..<10 {
            offsets.append(bytes.count)
            let ms = Self.firstMs + Int64(i)
            bytes += JournalRecord.encode(EventPayload.build(id: Random.uuidV7(unixMilliseconds: ms), name: "o\(i)", timestampMs: ms,
                                                             propertiesJSON: nil, anonymousID: "a", userID: nil, sessionID: "s"))
        }
        let fd = Glibc.open(folder + "/" + name, O_WRONLY | O_CREAT, 0o600)
        XCTAssertEqual(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, bytes.count)
        close(fd)
        let db = try SQLiteStore(directory: directory)
        try db.kvPut(namespace: EventImporter.progressNamespace, key: name, value: Array(String(offsets[4]).utf8), updatedMs: 0)
        let (store, _) = try openStore()
        XCTAssertEqual(try tableNames(store), (4..<10).map { "o\($0)" })
        XCTAssertEqual(store.table.damagedDropped.load(ordering: .relaxed), 0)
        XCTAssertEqual(try progressMarks(db), [])
        // A mark that is not a number starts over (ids already queued are ignored).
        let again = "events-999998-r0-0123456789abcdef.journal"
        let fd2 = Glibc.open(folder + "/" + again, O_WRONLY | O_CREAT, 0o600)
        XCTAssertEqual(bytes.withUnsafeBytes { write(fd2, $0.baseAddress, $0.count) }, bytes.count)
        close(fd2)
        try db.kvPut(namespace: EventImporter.progressNamespace, key: again, value: Array("x9".utf8), updatedMs: 0)
        try store.recoverOrphans()
        XCTAssertEqual(try tableNames(store), (4..<10).map { "o\($0)" } + (0..<4).map { "o\($0)" })
    }
}
