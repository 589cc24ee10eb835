import XCTest
import Glibc
@testable import AppNorthCore

/// The event store's stages, each on its own: the table (`EventTable`),
/// the limits (`QueueLimits`), the importer (`EventImporter`) and orphan
/// recovery (`OrphanRecovery`). No server, no thread.
final class EventStoreStagesTests: XCTestCase {
    var folder = ""
    static let firstMs: Int64 = 1_700_000_000_000

    override func setUp() { folder = "/tmp/appnorth-stages-\(getpid())-\(Random.hexToken(bytes: 4))" }
    override func tearDown() { _ = system("rm -rf '\(folder)'") }

    func openStore() throws -> (EventStore, SQLiteStore) {
        let directory = try DataDirectory(path: folder)
        let db = try SQLiteStore(directory: directory)
        return (try EventStore(db: db, directory: directory, epoch: 0), db)
    }

    /// The table's totals follow its own deletes, and another connection's
    /// changes once `refreshTotals` sees the data version move.
    func testTableTotalsFollowDeletesAndOtherConnections() throws {
        let (store, _) = try openStore()
        try store.journalForTests(0..<10, firstMs: Self.firstMs)
        try store.importer.drain()
        let table = store.table
        XCTAssertEqual(table.count.load(ordering: .relaxed), 10)
        let rows = try table.oldest(3)
        XCTAssertEqual(try table.remove(rows), 3)
        XCTAssertEqual(try table.remove(ids: [try table.oldest(1)[0].id, "no-such-id"]), 1)
        XCTAssertEqual(table.count.load(ordering: .relaxed), 6)
        XCTAssertEqual(table.removals.load(ordering: .relaxed), 1, "rejected ids count as a removal; a batch's own removal does not")
        let other = try SQLiteStore(directory: DataDirectory(path: folder))
        _ = try other.withConnection { conn throws(AppNorthError) in try conn.run("DELETE FROM events WHERE seq IN (SELECT seq FROM events LIMIT 2)") }
        try store.db.withConnection { conn throws(AppNorthError) in try table.refreshTotals(conn) }
        XCTAssertEqual(table.count.load(ordering: .relaxed), 4)
        XCTAssertEqual(table.bytes.load(ordering: .relaxed), try table.oldest(100).reduce(0) { $0 + RowCost.bytes(payload: $1.payload.count) },
                       "each row at its pages (RowCost)")
    }

    /// The limits: under them nothing is over; past the count limit a trim
    /// drops the oldest, counts them, and leaves exactly the limit.
    func testLimitsTrimTheOldestAndCountThem() throws {
        let (store, _) = try openStore()
        try store.journalForTests(0..<50, firstMs: Self.firstMs)
        try store.importer.drain()
        let limits = store.limits
        XCTAssertFalse(try store.importer.withTurn { own throws(AppNorthError) in try limits.isOver((50, 1 << 30), own: own) })
        XCTAssertTrue(try store.importer.withTurn { own throws(AppNorthError) in try limits.isOver((49, 1 << 30), own: own) })
        XCTAssertEqual(try store.importer.withTurn { own throws(AppNorthError) in try limits.trim(to: (40, 1 << 30), own: own) }, 10)
        XCTAssertEqual(limits.dropped.count, 10)
        XCTAssertEqual(try store.db.withConnection { conn throws(AppNorthError) in try EventTable.totals(conn).dropped }, 10,
                       "the stored counter too, in the trim's transaction")
        XCTAssertEqual(store.table.count.load(ordering: .relaxed), 40)
        let oldest = try store.table.oldest(1).first.flatMap { try? JSON.parse(String(decoding: $0.payload, as: UTF8.self)) }
        XCTAssertEqual(oldest?["name"]?.stringValue, "e10")
    }

    /// The importer: a drain moves the journal into the table and settles
    /// the journal's totals; a part import takes at most its part.
    func testImporterMovesTheJournalAndSettlesItsTotals() throws {
        let (store, _) = try openStore()
        try store.journalForTests(0..<300, firstMs: Self.firstMs)
        XCTAssertEqual(store.journaled, 300)
        try store.importer.drainPart(100)
        XCTAssertEqual(store.table.count.load(ordering: .relaxed), 100)
        XCTAssertEqual(store.journaled, 200)
        XCTAssertTrue(store.importer.hasRetiredRest)
        try store.importer.drain()
        XCTAssertEqual(store.table.count.load(ordering: .relaxed), 300)
        XCTAssertEqual(store.journaled, 0)
        XCTAssertFalse(store.importer.hasRetiredRest)
    }

    /// Orphan recovery: a journal whose process is gone (nobody holds its
    /// lock) is imported and deleted at the next scan.
    func testRecoveryImportsAnEndedProcesssJournal() throws {
        let (first, _) = try openStore()
        try first.journalForTests(0..<20, firstMs: Self.firstMs)
        let files = try first.journal.journalNames().map { name in
            (name, try XCTUnwrap(readAll(folder + "/" + name)))
        }.filter { !$0.1.isEmpty }
        XCTAssertFalse(files.isEmpty)
        let (store, _) = try openStore()
        XCTAssertEqual(store.table.count.load(ordering: .relaxed), 0, "a live handle's journal is not an orphan")
        for (index, (_, bytes)) in files.enumerated() {
            let path = folder + "/events-999999\(index)-r0-0123456789abcdef.journal"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            XCTAssertEqual(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, bytes.count)
            close(fd)
        }
        try store.recovery.recover()
        XCTAssertEqual(store.table.count.load(ordering: .relaxed), 20)
        XCTAssertFalse(try store.journal.journalNames().contains { $0.hasPrefix("events-999999") })
    }

    func readAll(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        return out
    }
}

/// The census's listing of journal files (`JournalListing`): reused only
/// while the directory's time is the one listed, and only when the listing
/// came well after the directory's last change.
final class JournalListingTests: XCTestCase {
    func time(_ ns: Int64) -> timespec { timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000)) }

    func testAListingIsReusedOnlyWhileTheDirectoryIsUnchangedAndSettled() {
        let settled = JournalListing(changed: time(5_000_000_000), listed: time(5_100_000_000), names: ["a"])
        XCTAssertEqual(settled.names(ifChangedAt: time(5_000_000_000)), ["a"])
        XCTAssertNil(settled.names(ifChangedAt: time(5_000_000_001)), "the directory changed since")
        let racy = JournalListing(changed: time(5_000_000_000), listed: time(5_010_000_000), names: ["a"])
        XCTAssertNil(racy.names(ifChangedAt: time(5_000_000_000)), "a change in the same clock tick would not show")
    }

    func testAJournalMadeRightAfterAListingIsSeen() throws {
        let folder = "/tmp/appnorth-listing-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        let directory = try DataDirectory(path: folder)
        let store = try EventStore(db: SQLiteStore(directory: directory), directory: directory, epoch: 0)
        let before = store.limits.journalNames()
        let name = "events-9999990-r0-0123456789abcdef.journal"
        close(directory.createNew(name))
        let after = store.limits.journalNames()
        XCTAssertEqual(Set(after), Set(before + [name]))
        XCTAssertEqual(store.limits.journalNames(), after)
    }
}
