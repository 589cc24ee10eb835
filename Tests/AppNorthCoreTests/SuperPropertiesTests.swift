import XCTest
import Glibc
@testable import AppNorthCore

/// Super properties: the value (`SuperProperties`: register, remove,
/// merge), then through queues at the server: two handles on one
/// directory, a restart, reset, refusals.
final class SuperPropertiesTests: EventsTestCase {
    func value(_ text: String) throws -> SuperProperties {
        try XCTUnwrap(SuperProperties.parse(Array(text.utf8)))
    }

    func merged(_ supers: SuperProperties, _ host: String?) -> String {
        guard var host else { return String(decoding: supers.merged(into: nil), as: UTF8.self) }
        return host.withUTF8 { String(decoding: supers.merged(into: $0), as: UTF8.self) }
    }

    func testMergingKeepsSpellingsAndLetsTheHostWin() throws {
        let supers = try value(#"{ "plan" : "pro", "v": 1.50, "nested": {"a": [1, 2]} }"#)
        XCTAssertEqual(String(decoding: supers.text, as: UTF8.self), #"{"plan":"pro","v":1.50,"nested":{"a": [1, 2]}}"#)
        XCTAssertEqual(merged(supers, nil), #"{"plan":"pro","v":1.50,"nested":{"a": [1, 2]}}"#)
        XCTAssertEqual(merged(supers, " { } "), #"{"plan":"pro","v":1.50,"nested":{"a": [1, 2]}}"#)
        XCTAssertEqual(merged(supers, #"{"x": 1}"#), #"{"plan":"pro","v":1.50,"nested":{"a": [1, 2]},"x": 1}"#)
        XCTAssertEqual(merged(supers, #" {"plan": "free", "\u0076": 2} "#), #"{"nested":{"a": [1, 2]},"plan": "free", "\u0076": 2}"#,
                       "a track() key wins, escaped or not")
        XCTAssertEqual(merged(SuperProperties(), #"{"x":1}"#), #"{"x":1}"#)
    }

    func testRegisterOnceAndRemove() throws {
        var supers = try value(#"{"a":1,"b":2}"#)
        let more = try XCTUnwrap(#"{"b":3,"c":4}"#.utf8CString.withUnsafeBufferPointer { raw in
            raw.withMemoryRebound(to: UInt8.self) { SuperProperties.members(of: UnsafeBufferPointer(rebasing: $0.dropLast())) }
        })
        var once = supers
        for m in more { once.set(m, overwrite: false) }
        XCTAssertEqual(String(decoding: once.text, as: UTF8.self), #"{"a":1,"b":2,"c":4}"#)
        for m in more { supers.set(m, overwrite: true) }
        XCTAssertEqual(String(decoding: supers.text, as: UTF8.self), #"{"a":1,"b":3,"c":4}"#)
        XCTAssertTrue(supers.remove(Array("b".utf8)))
        XCTAssertFalse(supers.remove(Array("b".utf8)))
        XCTAssertEqual(String(decoding: supers.text, as: UTF8.self), #"{"a":1,"c":4}"#)
        XCTAssertNil(SuperProperties.parse(Array("[1]".utf8)))
        XCTAssertNil(SuperProperties.parse(Array(#"{"a":"#.utf8)))
    }

    func testTwoHandlesARestartAndReset() throws {
        let a = try open(quiet()), b = try open(quiet())
        try a.register(#"{"plan":"pro","n":1}"#)
        try b.track("from_b", propertiesJSON: #"{"s":"x"}"#)
        try b.register(#"{"plan":"team","first":true}"#, once: true)
        try a.track("from_a")
        try a.unregister("n")
        try b.track("unregistered")
        try a.flush(timeoutMilliseconds: 30_000)
        try b.flush(timeoutMilliseconds: 30_000)
        a.close(timeoutMilliseconds: 0)
        b.close(timeoutMilliseconds: 0)
        let c = try open(quiet())
        defer { c.close(timeoutMilliseconds: 0) }
        XCTAssertEqual(try c.superPropertiesJSON(), #"{"plan":"pro","first":true}"#)
        try c.track("restarted")
        try c.reset()
        XCTAssertEqual(try c.superPropertiesJSON(), "{}")
        try c.track("after_reset", propertiesJSON: #"{"k":1}"#)
        try c.flush(timeoutMilliseconds: 30_000)
        let stored = try serverEvents()
        func properties(_ name: String) -> String? {
            stored.first { $0["name"]?.stringValue == name }?["properties_raw"]?.stringValue
        }
        XCTAssertEqual(properties("from_b"), #"{"plan":"pro","n":1,"s":"x"}"#)
        XCTAssertEqual(properties("from_a"), #"{"plan":"pro","n":1,"first":true}"#)
        XCTAssertEqual(properties("unregistered"), #"{"plan":"pro","first":true}"#)
        XCTAssertEqual(properties("restarted"), #"{"plan":"pro","first":true}"#)
        XCTAssertEqual(properties("after_reset"), #"{"k":1}"#)
    }

    func testRefusalsSaveNothingAndTheSetCountsTowardTheEventLimit() throws {
        let events = try open(quiet { $0.maxEventBytes = 1024 })
        defer { events.close(timeoutMilliseconds: 0) }
        XCTAssertThrowsError(try events.register("[1]")) {
            guard case .invalidJSON = $0 as? AppNorthError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try events.register(#"{"id":"x"}"#)) {
            guard case .invalidArgument = $0 as? AppNorthError else { return XCTFail("\($0)") }
        }
        let big = #"{"s":""# + String(repeating: "x", count: 600) + #""}"#
        XCTAssertThrowsError(try events.register(big)) {
            guard case .tooLarge = $0 as? AppNorthError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try events.superPropertiesJSON(), "{}")
        try events.register(#"{"s":""# + String(repeating: "x", count: 400) + #""}"#)
        XCTAssertThrowsError(try events.track("e", propertiesJSON: #"{"p":""# + String(repeating: "y", count: 600) + #""}"#)) {
            guard case .tooLarge = $0 as? AppNorthError else { return XCTFail("\($0)") }
        }
        XCTAssertTrue(try events.track("fits", propertiesJSON: #"{"p":1}"#))
    }

    func testADamagedFileReadsAsNoneAndTheNextRegisterReplacesIt() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 0) }
        writeFile(folder + "/super_properties.json", Array("{not json".utf8))
        try events.register(#"{"a":1}"#)
        XCTAssertEqual(try events.superPropertiesJSON(), #"{"a":1}"#)
    }
}
