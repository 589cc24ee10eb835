import XCTest
import Glibc
@testable import AppNorthCore

/// RowCost and FileBudget: the arithmetic the 5 MB on the files rests on
/// (#32), pure: no store, no thread. DiskBudgetTests measures the files.
final class RowCostTests: XCTestCase {
    func testAnEventCostsItsPagesNotItsPayload() {
        // A small event shares a leaf; big ones take overflow pages of
        // 4 KiB and a leaf share: 10,000 bytes two overflow pages, 10 KiB
        // (the disk tests' events) three, 60,000 bytes fourteen.
        XCTAssertEqual(RowCost.bytes(payload: 217), 340)
        XCTAssertEqual(RowCost.bytes(payload: 10_000), 10_288)
        XCTAssertEqual(RowCost.bytes(payload: 10_240), 12_336)
        XCTAssertEqual(RowCost.bytes(payload: 60_000), 61_488)
        for payload in [0, 217, 1_000, 4_000, 10_000, 60_000, 65_536] {
            XCTAssertGreaterThan(RowCost.bytes(payload: payload), payload, "\(payload)")
        }
    }

    func testTheCostNeverShrinksAsThePayloadGrows() {
        var last = RowCost.bytes(payload: 0)
        for payload in stride(from: 1, through: 70_000, by: 7) {
            let cost = RowCost.bytes(payload: payload)
            XCTAssertGreaterThanOrEqual(cost, last, "payload \(payload)")
            last = cost
        }
    }

    func testANegativePayloadCountsAsEmpty() {
        XCTAssertEqual(RowCost.bytes(payload: -5), RowCost.bytes(payload: 0))
    }

    func testTheRowsGetNineTenthsOfTheLimit() {
        XCTAssertEqual(FileBudget.rowBytes(5 * 1_048_576), 4_718_592)
        XCTAssertEqual(FileBudget.rowBytes(0), 0)
        XCTAssertEqual(FileBudget.rowBytes(-1), 0)
    }

    func testTheWALTightensOnlyNearTheBudget() {
        let rows = FileBudget.rowBytes(5 * 1_048_576)
        XCTAssertEqual(FileBudget.walPages(files: 0, rowLimit: rows), FileBudget.roomyWALPages)
        XCTAssertEqual(FileBudget.walPages(files: rows, rowLimit: rows), FileBudget.tightWALPages)
        let edge = rows / 6 * 7 - FileBudget.roomyWALPeak
        XCTAssertEqual(FileBudget.walPages(files: edge, rowLimit: rows), FileBudget.roomyWALPages)
        XCTAssertEqual(FileBudget.walPages(files: edge + 1, rowLimit: rows), FileBudget.tightWALPages)
    }

    /// The look-ahead counts what `track` may journal beside a drain on
    /// top of the copy going in (#32). Figures of two drains measured in
    /// `DiskBudgetTests`' 60 KB case: a 2.03 MB journal rotated out into
    /// an empty database under load (the larger of copy and growth, 4.02
    /// MB, chose the roomy WAL, and the files reached 5.61-5.73 MB), and a
    /// 1.35 MB one unloaded (3.74 MB: roomy, 5.22-5.26 MB at most).
    func testTheWALLooksAheadAtTheCopyAndTheJournalsGrowingBesideIt() {
        let rows = FileBudget.rowBytes(5 * 1_048_576)
        let loaded = FileBudget.filesUntilNextDrain(base: 4_096, journals: 1_988_009, pending: 2_029_104, rowLimit: rows)
        XCTAssertEqual(loaded, 4_096 + 2_029_104 + 2_380_840)
        XCTAssertEqual(FileBudget.walPages(files: loaded, rowLimit: rows), FileBudget.tightWALPages)
        let unloaded = FileBudget.filesUntilNextDrain(base: 4_096, journals: 1_325_336, pending: 1_352_736, rowLimit: rows)
        XCTAssertEqual(FileBudget.walPages(files: unloaded, rowLimit: rows), FileBudget.roomyWALPages)
        // Nothing to import: the table and what `track` may journal.
        XCTAssertEqual(FileBudget.filesUntilNextDrain(base: 2_000_000, journals: 0, pending: 0, rowLimit: rows),
                       2_000_000 + (rows + rows / 100 - 2_000_000) / 2)
        // A journal larger than that growth (another's) counts as it is, the copy beside it.
        XCTAssertEqual(FileBudget.filesUntilNextDrain(base: 4_000_000, journals: 900_000, pending: 100_000, rowLimit: rows),
                       5_000_000)
    }

    /// The stored totals (`events_totals`, Schema migration 3) are kept by
    /// triggers with the same arithmetic as `RowCost`, for every size class
    /// (one page, the overflow edges, several overflow pages), inserts and
    /// deletes alike, whoever makes them.
    func testTheTriggersCountEveryRowAtItsRowCost() throws {
        let folder = "/tmp/appnorth-rowcost-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        let db = try SQLiteStore(directory: DataDirectory(path: folder))
        let sizes = [0, 1, 100, 4_000, 4_016, 4_017, 4_500, 8_200, 12_345, 60_000, 200_000]
        try db.withConnection { conn throws(AppNorthError) in
            var expected = 0
            for (index, size) in sizes.enumerated() {
                try conn.run("INSERT INTO events (id, payload, bytes) VALUES (?, ?, ?)",
                             [.text("id-\(index)"), .blob([UInt8](repeating: 120, count: size)), .int(Int64(size))])
                expected += RowCost.bytes(payload: size)
                let totals = try EventTable.totals(conn)
                XCTAssertEqual(totals.count, index + 1)
                XCTAssertEqual(totals.bytes, expected, "after a row of \(size) bytes")
            }
            try conn.run("DELETE FROM events WHERE id = ?", [.text("id-3")])
            XCTAssertEqual(try EventTable.totals(conn).bytes, expected - RowCost.bytes(payload: sizes[3]))
            try conn.run("DELETE FROM events")
            XCTAssertEqual(try EventTable.totals(conn).count, 0)
            XCTAssertEqual(try EventTable.totals(conn).bytes, 0)
        }
    }

    /// A database of an older schema (rows already queued) gets its totals
    /// from its rows when it is migrated.
    func testTheMigrationCountsTheRowsAlreadyThere() throws {
        let folder = "/tmp/appnorth-rowcost-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        let db = try SQLiteStore(directory: DataDirectory(path: folder))
        try db.withConnection { conn throws(AppNorthError) in
            try conn.exec("DROP TRIGGER events_totals_insert; DROP TRIGGER events_totals_delete; DROP TABLE events_totals")
            for (index, size) in [10, 5_000, 70_000].enumerated() {
                try conn.run("INSERT INTO events (id, payload, bytes) VALUES (?, ?, ?)",
                             [.text("id-\(index)"), .blob([UInt8](repeating: 120, count: size)), .int(0)])
            }
            try conn.exec(Schema.migrations[2])
            let totals = try EventTable.totals(conn)
            XCTAssertEqual(totals.count, 3)
            XCTAssertEqual(totals.bytes, [10, 5_000, 70_000].reduce(0) { $0 + RowCost.bytes(payload: $1) })
            XCTAssertEqual(totals.dropped, 0)
        }
    }
}
