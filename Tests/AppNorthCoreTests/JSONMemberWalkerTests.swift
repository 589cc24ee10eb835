@testable import AppNorthCore
import XCTest

/// The one JSON member walker (JSONText.objectMembers for config documents,
/// EventSoundness for stored events): exact value ranges, escaped keys
/// decoded, and malformed text refused without a trap.
final class JSONMemberWalkerTests: XCTestCase {
    private func members(_ text: String) -> [(String, String)]? {
        let bytes = Array(text.utf8)
        return JSONText.objectMembers(bytes)?.map { ($0.key, String(decoding: bytes[$0.value], as: UTF8.self)) }
    }

    func testValueRangesKeepTheirSpelling() throws {
        let found = try XCTUnwrap(members(#" { "a" : 9.99 , "b":[1,{"c":"}"}], "d\"e":"x\\y", "f":null, "a":true } "#))
        XCTAssertEqual(found.map(\.0), ["a", "b", "d\"e", "f", "a"])
        XCTAssertEqual(found.map(\.1), ["9.99", #"[1,{"c":"}"}]"#, #""x\\y""#, "null", "true"])
        XCTAssertEqual(members("{}")?.count, 0)
    }

    func testEscapedKeysAreDecoded() {
        XCTAssertEqual(members(#"{"\u00e9\ud83d\ude00\n":1}"#)?.first?.0, "\u{e9}\u{1F600}\n")
        XCTAssertNil(members(#"{"\ud83d":1}"#), "a lone high surrogate")
        XCTAssertNil(members(#"{"\u12":1}"#), "a short escape")
    }

    func testMalformedTextIsRefused() {
        for text in ["", "[]", "{", #"{"a""#, #"{"a":}"#, #"{"a":1,}"#, #"{"a":1"#, #"{"a" 1}"#, #"{"a":"x}"#,
                     #"{"a":[1,2}"#, #"{a:1}"#, #"{"a":1 "b":2}"#, "{\"a\\"] {
            XCTAssertNil(members(text), text)
        }
    }

    func testWalkerReportsEscapedKeysWithoutDecoding() {
        let bytes = Array(#"{"i\u0064":1,"name":"n"}"#.utf8)
        bytes.withUnsafeBufferPointer { buffer in
            var walker = JSONMemberWalker(buffer)
            XCTAssertEqual(walker.next()?.keyEscaped, true)
            let second = walker.next()
            XCTAssertEqual(second?.keyEscaped, false)
            XCTAssertEqual(second.map { String(decoding: buffer[$0.key], as: UTF8.self) }, "name")
            XCTAssertNil(walker.next())
            XCTAssertFalse(walker.malformed)
        }
    }
}
