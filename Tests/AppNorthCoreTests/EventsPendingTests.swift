import Glibc
import XCTest
@testable import AppNorthCore

/// `pendingJSON` (appnorth_events_pending, issue #40 item 5): the queued
/// events as the server would receive them, against the real server.
final class EventsPendingTests: EventsTestCase {
    override class var isolatedApp: Bool { true }

    func testPendingAfterAnOfflineBurstIsWhatTheServerThenReceives() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 5000) }
        XCTAssertEqual(try events.pendingJSON(max: 100), "[]")
        try TestServer.offline {
            for i in 0..<30 { XCTAssertTrue(try events.track("burst", propertiesJSON: #"{"i":\#(i),"price":9.99}"#)) }
            XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        }
        // Tracked, journaled, not imported: the call imports this handle's journal.
        let pending = try JSON.parse(Array(try events.pendingJSON(max: 1000).utf8))
        let list = pending.arrayElements
        XCTAssertEqual(list.count, 30)
        XCTAssertEqual(list.map { $0["properties"]?["i"]?.intValue ?? -1 }, (0..<30).map { Int64($0) }, "oldest first")
        XCTAssertTrue(try events.pendingJSON(max: 1000).contains(#""price":9.99"#), "the host's own number text")
        let firstTwo = try JSON.parse(Array(try events.pendingJSON(max: 2).utf8)).arrayElements
        XCTAssertEqual(firstTwo.map { $0["id"]?.stringValue }, list.prefix(2).map { $0["id"]?.stringValue })

        // What the server then stores is what pending said, id for id.
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 30)
        let stored = try TestServer.get("/admin/apps/\(app)/state")["events"]!.arrayElements
        XCTAssertEqual(Set(stored.compactMap { $0["id"]?.stringValue }), Set(list.compactMap { $0["id"]?.stringValue }))
        XCTAssertEqual(try events.pendingJSON(max: 1000), "[]", "delivered events are no longer pending")
    }

    func testBadMaxAndAClosedQueueAreRefused() throws {
        let events = try open(quiet())
        XCTAssertThrowsError(try events.pendingJSON(max: 0)) { XCTAssertEqual($0 as? AppNorthError, .invalidArgument("max must be at least 1")) }
        XCTAssertThrowsError(try events.pendingJSON(max: -5))
        XCTAssertEqual(try events.pendingJSON(max: Int(Int32.max)), "[]")
        events.close(timeoutMilliseconds: 1000)
        XCTAssertThrowsError(try events.pendingJSON(max: 1)) {
            guard case .wrongState = $0 as? AppNorthError else { return XCTFail("\($0)") }
        }
    }
}
