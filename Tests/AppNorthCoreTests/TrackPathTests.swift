import XCTest
import Synchronization
@testable import AppNorthCore

/// The bytes `track` writes (its stripe buffer, per-millisecond stamp and
/// ids) and the checks it makes of text that comes from C.
final class TrackPathTests: EventsTestCase {
    /// A wall clock the test moves.
    final class SteppedClock: AppNorthClock {
        let ms = Atomic<Int64>(1_764_480_000_123)
        func monotonicNanoseconds() -> UInt64 { SystemClock().monotonicNanoseconds() }
        func wallMilliseconds() -> Int64 { ms.load(ordering: .relaxed) }
    }

    func openStepped(_ clock: SteppedClock) throws -> AppNorthEvents {
        try AppNorthEvents(client: TestServer.client(app: app), directory: DataDirectory(path: folder), options: quiet(),
                           clock: clock)
    }

    func journaled() throws -> [JournalRecord.Event] {
        try journalFiles().flatMap { JournalRecord.decode(try readFile($0)).events }
    }

    func testTheJournaledEventIsTheBuildersEventByteForByte() throws {
        let clock = SteppedClock()
        let events = try openStepped(clock)
        defer { events.close(timeoutMilliseconds: 0) }
        let name = "tap \"x\"\n\u{01}\\ é"
        let properties = #"{"price": 9.99, "s":"é\u00e9", "n":[1,{"k":null}]}"#
        XCTAssertTrue(try events.track(name, propertiesJSON: properties))
        XCTAssertTrue(try events.track("no properties"))
        let stored = try journaled()
        XCTAssertEqual(stored.count, 2)
        for (event, expected) in zip(stored, [(name, properties), ("no properties", nil)]) {
            let json = try JSON.parse(event.payload)
            let rebuilt = EventPayload.build(id: event.id, name: expected.0, timestampMs: clock.wallMilliseconds(),
                                             propertiesJSON: expected.1, anonymousID: try XCTUnwrap(json["anonymous_id"]?.stringValue),
                                             userID: nil, sessionID: try XCTUnwrap(json["session_id"]?.stringValue))
            XCTAssertEqual(String(decoding: event.payload, as: UTF8.self), String(decoding: rebuilt, as: UTF8.self))
            XCTAssertEqual(json["name"]?.stringValue, expected.0)
            XCTAssertEqual(json["timestamp"]?.intValue, clock.wallMilliseconds())
        }
        XCTAssertTrue(String(decoding: stored[0].payload, as: UTF8.self).hasSuffix(#","properties":"# + properties + "}"))
    }

    func testIdsAreUUIDv7OfTheirMillisecondAndUniqueWithinIt() throws {
        let clock = SteppedClock()
        let events = try openStepped(clock)
        defer { events.close(timeoutMilliseconds: 0) }
        // Many events in one millisecond, then a step, then a jump back (a
        // wall clock set back): every id carries its own event's time.
        let times: [Int64] = Array(repeating: 1_764_480_000_123, count: 600) + [1_764_480_000_124, 1_700_000_000_000, 0]
        for ms in times {
            clock.ms.store(ms, ordering: .relaxed)
            try events.track("e")
        }
        let stored = try journaled()
        XCTAssertEqual(stored.count, times.count)
        XCTAssertEqual(Set(stored.map(\.id)).count, times.count, "ids are unique")
        for (event, ms) in zip(stored, times) {
            let json = try JSON.parse(event.payload)
            XCTAssertEqual(json["timestamp"]?.intValue, ms)
            XCTAssertEqual(event.milliseconds, ms, event.id)
            let id = Array(event.id.utf8)
            XCTAssertEqual(id.count, 36)
            XCTAssertEqual([id[8], id[13], id[18], id[23]], Array("----".utf8), event.id)
            XCTAssertEqual(id[14], UInt8(ascii: "7"), "version 7: \(event.id)")
            XCTAssertTrue("89ab".utf8.contains(id[19]), "variant 10: \(event.id)")
            XCTAssertTrue(id.allSatisfy { "0123456789abcdef-".utf8.contains($0) }, event.id)
        }
    }

    /// The C entry's path: bytes that may not be UTF-8, refused by the
    /// argument's name, the properties' UTF-8 first (as when the C entry
    /// decoded them before anything else).
    func testBytesFromCAreCheckedAsUTF8WithTheArgumentsNames() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 0) }
        func track(_ name: [UInt8], _ properties: [UInt8]?) throws(AppNorthError) -> Bool {
            let result = name.withUnsafeBufferPointer { n in
                Result { () throws(AppNorthError) -> Bool in
                    guard let properties else { return try events.track(utf8: n, properties: nil, unchecked: ("name", "properties_json")) }
                    return try properties.withUnsafeBufferPointer { p throws(AppNorthError) in
                        try events.track(utf8: n, properties: p, unchecked: ("name", "properties_json"))
                    }
                }
            }
            return try result.get()
        }
        func refusal(_ name: [UInt8], _ properties: [UInt8]?) -> AppNorthError? {
            do throws(AppNorthError) {
                _ = try track(name, properties)
                return nil
            } catch {
                return error
            }
        }
        let badUTF8: [UInt8] = [0x61, 0xFF]
        XCTAssertEqual(refusal(badUTF8, nil), .invalidUTF8("name is not valid UTF-8"))
        XCTAssertEqual(refusal([0xED, 0xA0, 0x80], nil), .invalidUTF8("name is not valid UTF-8"), "a surrogate")
        XCTAssertEqual(refusal([0xC0, 0xAF], nil), .invalidUTF8("name is not valid UTF-8"), "overlong")
        // Bad UTF-8 in the properties wins over a bad name, and over a JSON
        // error before it.
        let badProperties = Array(#"{"a":"x"#.utf8) + [0xFF] + Array(#""}"#.utf8)
        XCTAssertEqual(refusal(badUTF8, badProperties), .invalidUTF8("properties_json is not valid UTF-8"))
        XCTAssertEqual(refusal(Array("e".utf8), Array("{1".utf8) + [0xFF]), .invalidUTF8("properties_json is not valid UTF-8"))
        XCTAssertEqual(refusal([], badProperties), .invalidUTF8("properties_json is not valid UTF-8"))
        // Names by characters: 256 two-byte characters are fine, 257 not.
        let two = Array("é".utf8)
        XCTAssertTrue(try track(Array(repeating: two, count: 256).flatMap { $0 }, nil))
        XCTAssertEqual(refusal(Array(repeating: two, count: 257).flatMap { $0 }, nil),
                       .invalidArgument("event name must be 1 to 256 characters"))
        XCTAssertEqual(refusal([], nil), .invalidArgument("event name must be 1 to 256 characters"))
        guard case .invalidJSON(let message, _)? = refusal(Array("e".utf8), Array("[1]".utf8)) else { return XCTFail("array") }
        XCTAssertEqual(message, "event properties must be a JSON object")
        XCTAssertTrue(try track(Array("é".utf8), Array(#"{"é":"\u00e9"}"#.utf8)))
        XCTAssertEqual(try journaled().count, 2)
    }
}
