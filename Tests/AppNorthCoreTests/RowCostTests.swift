import XCTest
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
}
