import XCTest
import Synchronization
@testable import AppNorthCore

/// The before_send hook (`BeforeSendFilter`, `EventTracker.trackFiltered`):
/// what a replacement must be, then through a queue at the server: keep,
/// drop, rewrite, fail closed, counted and logged once per burst.
final class BeforeSendTests: EventsTestCase {
    static let id = "0190a5b4-1c2d-7e3f-8a9b-0c1d2e3f4a5b"

    func refusal(_ text: String) -> String? {
        var id = Self.id
        return id.withUTF8 { BeforeSendFilter.refusal(Array(text.utf8), id: UnsafeRawBufferPointer($0), maxEventBytes: 1024) }
    }

    func testAReplacementMustBeAWholeEventWithItsID() {
        let ok = #"{"id":"\#(Self.id)","name":"n","timestamp":1700000000000,"properties":{"a":1}}"#
        XCTAssertNil(refusal(ok))
        XCTAssertNil(refusal(#"{"id":"\#(Self.id)","name":"n","timestamp":1700000000000}"#), "properties may go")
        XCTAssertNotNil(refusal("[1]"))
        XCTAssertNotNil(refusal("{"))
        XCTAssertNotNil(refusal(#"{"id":"other","name":"n","timestamp":1700000000000}"#), "the id changed")
        XCTAssertNotNil(refusal(#"{"id":"\#(Self.id)","timestamp":1700000000000}"#), "no name")
        XCTAssertNotNil(refusal(#"{"id":"\#(Self.id)","name":"n","timestamp":-1}"#), "timestamp out of range")
        XCTAssertNotNil(refusal(#"{"id":"\#(Self.id)","name":"n","timestamp":1700000000000,"properties":[1]}"#))
        XCTAssertNotNil(refusal(#"{"id":"\#(Self.id)","name":"n","timestamp":1700000000000,"p":""# + String(repeating: "x", count: 1024) + #""}"#),
                        "over max_event_bytes")
    }

    func testKeepDropRewriteAndFailuresAtTheServer() throws {
        let seen = Lock<[String]>([], level: LockClass.test)
        let lines = Lock<[String]>([], level: LockClass.test)
        let hook = BeforeSendHook { event in
            let text = String(decoding: event, as: UTF8.self)
            seen.withLock { $0.append(text) }
            XCTAssertEqual(event.baseAddress![event.count], 0, "a C string")
            if text.contains(#""name":"secret""#) { return .drop }
            if text.contains(#""name":"boom""#) { return .failed("it returned 7") }
            if text.contains(#""name":"scrub""#) {
                return .replace(Array(text.replacingOccurrences(of: #""email":"a@b.c","#, with: "").utf8))
            }
            return .keep
        }
        let events = try open(quiet { $0.beforeSend = hook }, logger: Logger(minimum: .debug) { _, line in
            lines.withLock { $0.append(line) }
        })
        defer { events.close(timeoutMilliseconds: 0) }
        try events.register(#"{"plan":"pro"}"#)
        XCTAssertTrue(try events.track("kept", propertiesJSON: #"{"n": 1.50}"#))
        XCTAssertFalse(try events.track("secret"))
        XCTAssertTrue(try events.track("scrub", propertiesJSON: #"{"email":"a@b.c","ok":1}"#))
        XCTAssertFalse(try events.track("boom"))
        XCTAssertFalse(try events.track("boom"))
        XCTAssertTrue(try events.track("kept"))
        XCTAssertFalse(try events.track("boom"))
        let first = try JSON.parse(Array(try XCTUnwrap(seen.withLock { $0.first }).utf8))
        XCTAssertEqual(first["name"]?.stringValue, "kept")
        XCTAssertEqual(first["session_id"]?.stringValue, try events.sessionID)
        XCTAssertTrue(seen.withLock { $0[0] }.hasSuffix(#","properties":{"plan":"pro","n": 1.50}}"#), "super properties merged")
        let failures = lines.withLock { $0 }.filter { $0.contains("before_send hook failed") }
        XCTAssertEqual(failures.count, 2, "once per burst: \(failures)")
        XCTAssertTrue(failures[0].contains("it returned 7"))
        try events.flush(timeoutMilliseconds: 30_000)
        let stored = try serverEvents()
        XCTAssertEqual(stored.compactMap { $0["name"]?.stringValue }, ["kept", "scrub", "kept"])
        XCTAssertEqual(stored[1]["properties_raw"]?.stringValue, #"{"plan":"pro","ok":1}"#)
        XCTAssertTrue(events.statsJSON().contains(#""filtered":4"#), events.statsJSON())
    }
}
