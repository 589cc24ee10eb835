import XCTest
@testable import AppNorthCore

/// EventPayload's writers, pure: the bytes they lay out.
final class EventPayloadTests: XCTestCase {
    func testEveryTimestampIsSpelledOut() throws {
        // -1 too: EventStamp starts rendered (as -1 ms); before, a first
        // event at -1 ms (a host clock) found "its" millisecond already
        // there, with no digits: `"timestamp":,`, not JSON.
        for ms: Int64 in [0, 7, 1_764_480_000_123, Int64.max, Int64.min, -1] {
            let event = EventPayload.build(id: "i", name: "n", timestampMs: ms, propertiesJSON: nil,
                                           anonymousID: "a", userID: nil, sessionID: "s")
            let text = String(decoding: event, as: UTF8.self)
            XCTAssertTrue(text.contains(#","timestamp":\#(ms),"anonymous_id":"a","#), text)
            XCTAssertTrue(text.hasSuffix(#""properties":{}}"#), text)
            XCTAssertEqual(try JSON.parse(event)["timestamp"]?.intValue, ms)
        }
    }
}
