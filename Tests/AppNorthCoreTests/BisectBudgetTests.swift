import XCTest
@testable import AppNorthCore

/// The bisect budget at the dev server (issue 32): a server that refuses
/// every request costs one batch its first request and at most
/// `BatchUpload.extraBudget(n)` more, counted in the server's request log;
/// the rest of the batch is discarded, and the flush is a failed one.
final class BisectBudgetTests: EventsTestCase {
    func refuseEverything(_ status: Int) throws {
        try TestServer.post("/admin/faults", #"{"status":\#(status),"count":100000,"path_prefix":"/v1/apps/swift/events"}"#)
    }

    /// Before the budget: 39 requests (2n - 1).
    func testA400ToEverythingCostsABatchOf20ThirteenRequests() throws {
        let events = try open(quiet())
        for i in 0..<20 { try events.track("e\(i)") }
        try refuseEverything(400)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 10_000))
        XCTAssertEqual(try eventPosts(), 1 + BatchUpload.extraBudget(20))
        XCTAssertEqual(try eventPosts(), 13)
        XCTAssertEqual(events.queuedCount, 0)
        let stats = try JSON.parse(events.statsJSON())
        XCTAssertEqual(stats["dropped"]?["client_error"]?.intValue, 20)
        XCTAssertEqual(stats["breaker"]?["consecutive_failures"]?.intValue, 1)
    }

    /// Before: one flush of 600 events sent 1,194 requests (6 batches of
    /// 100, 199 each), dropped all 600 and returned OK with no failed
    /// flush. Now the first batch costs 17 requests and fails the flush;
    /// the rest waits for the next one.
    func testA413ToEverythingIsBoundedAndAFailedFlush() throws {
        let events = try open(quiet())
        try events.setNetworkType(.wifi)  // batches of 100, as in the issue
        for i in 0..<600 { try events.track("e\(i)") }
        try refuseEverything(413)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 10_000))
        XCTAssertEqual(try eventPosts(), 1 + BatchUpload.extraBudget(100))
        XCTAssertEqual(events.queuedCount, 500)
        let stats = try JSON.parse(events.statsJSON())
        let dropped = (stats["dropped"]?["payload_too_large"]?.intValue ?? 0) + (stats["dropped"]?["client_error"]?.intValue ?? 0)
        XCTAssertEqual(dropped, 100)
        XCTAssertEqual(stats["breaker"]?["consecutive_failures"]?.intValue, 1, "a flush all refused is a failed flush")
    }

    /// One poisoned event in a batch of 100 is still found within the budget.
    func testOnePoisonedEventIsStillFound() throws {
        let events = try open(quiet())
        for i in 0..<100 { try events.track(i == 37 ? "poison" : "e\(i)") }
        try TestServer.post("/admin/settings", #"{"poisoned_event_names":["poison"]}"#)
        try events.flush(timeoutMilliseconds: 10_000)
        XCTAssertEqual(try serverEvents().count, 99)
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["client_error"]?.intValue, 1)
        XCTAssertLessThanOrEqual(try eventPosts(), 1 + BatchUpload.extraBudget(100))
    }
}
