import XCTest
@testable import AppNorthCore

/// "Closed", held in one place (`EventsLifecycle`), and what a closed
/// handle answers.
final class EventsLifecycleTests: EventsTestCase {
    func testCloseIsOneStepAndIdempotent() {
        let lifecycle = EventsLifecycle()
        XCTAssertFalse(lifecycle.isClosed)
        XCTAssertTrue(lifecycle.close())
        XCTAssertTrue(lifecycle.isClosed)
        XCTAssertFalse(lifecycle.close(), "only the first close closes")
    }

    func testAClosedHandleRefusesEveryChange() throws {
        let events = try open(quiet())
        try events.track("before")
        events.close(timeoutMilliseconds: 0)
        XCTAssertTrue(events.lifecycle.isClosed)
        for call in [{ try events.track("after") }, { try events.startSession() }, { try events.setNetworkType(.wifi) },
                     { _ = try events.flush(timeoutMilliseconds: 100) }] as [() throws -> Void] {
            XCTAssertThrowsError(try call()) {
                guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["consent"]?.intValue, 0)
    }
}
