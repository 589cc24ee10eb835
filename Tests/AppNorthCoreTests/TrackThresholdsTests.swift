import XCTest
@testable import AppNorthCore

/// The figures past which `track` acts (`TrackThresholds`), from plain
/// options: no queue, lock or thread.
final class TrackThresholdsTests: XCTestCase {
    func options(events: Int, bytes: Int) -> AppNorthEventsOptions {
        var o = AppNorthEventsOptions()
        o.maxQueuedEvents = events
        o.maxQueuedBytes = bytes
        return o
    }

    func testTheDefaultsGiveOnePercentOfSlackAndStepsOf32() {
        let t = TrackThresholds(options(events: 10_000, bytes: 5_000_000), stripes: 8)
        XCTAssertEqual(t.limits, .init(count: 10_100, bytes: 5_050_000))
        XCTAssertEqual(t.step, .init(count: 32, bytes: 32 << 10))
        XCTAssertEqual(t.margin, .init(count: 256, bytes: 8 * (32 << 10)), "every stripe's unpublished records together")
        XCTAssertFalse(t.pastLimits((10_100, 5_050_000)))
        XCTAssertTrue(t.pastLimits((10_101, 0)))
        XCTAssertTrue(t.pastLimits((0, 5_050_001)))
    }

    func testSmallLimitsCountEveryEvent() {
        let t = TrackThresholds(options(events: 50, bytes: 1_000), stripes: 8)
        XCTAssertEqual(t.step, .init(count: 1, bytes: 31), "a step of 1 event: every event counts at once")
        XCTAssertEqual(t.limits.count, 50, "under 100 events: no slack")
        XCTAssertEqual(t.margin, .init(count: 8, bytes: 248))
    }

    func testNearIsTheWakeUpCountOrTheLimits() {
        let t = TrackThresholds(options(events: 10_000, bytes: 5_000_000), stripes: 8)
        XCTAssertEqual(t.near(wakeAt: 20).count, 20, "uploads succeed: counted exactly around the threshold")
        XCTAssertEqual(t.near(wakeAt: Int.max).count, 10_101, "after a failed upload only the limits count")
        XCTAssertEqual(t.near(wakeAt: 20).bytes, 5_050_001)
    }

    /// While another handle's or process's journal holds events, the byte
    /// limit is the rows' shared share (eight ninths of the rows' nine
    /// tenths: FileBudget.sharedRowBytes) with its 1 %; the count limit
    /// does not change.
    func testSharedDirectoryBytesAreEightNinthsWithTheirSlack() {
        let rows = FileBudget.rowBytes(5 << 20)
        XCTAssertEqual(rows, 4_718_592)
        XCTAssertEqual(FileBudget.sharedRowBytes(rows), 4_194_304, "eight tenths of 5 MiB")
        let t = TrackThresholds(options(events: 10_000, bytes: rows), stripes: 8)
        XCTAssertEqual(t.sharedBytes, 4_194_304 + 41_943)
        XCTAssertFalse(t.pastLimits((0, 4_236_247), shared: true))
        XCTAssertTrue(t.pastLimits((0, 4_236_248), shared: true))
        XCTAssertFalse(t.pastLimits((0, 4_236_248)), "not shared: the rows' nine tenths")
        XCTAssertTrue(t.pastLimits((10_101, 0), shared: true))
        XCTAssertEqual(t.near(wakeAt: Int.max, shared: true).bytes, 4_236_248)
        XCTAssertEqual(FileBudget.sharedRowBytes(-5), 0)
        XCTAssertEqual(t.sharedJournal, 294_912, "a sixteenth of the rows' share: 288 KiB")
        XCTAssertEqual(TrackThresholds(options(events: 50, bytes: 1_000), stripes: 8).sharedJournal, 62,
                       "at least a step")
    }
}
