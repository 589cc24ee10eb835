import XCTest
@testable import AppNorthCore

final class JSONTests: XCTestCase {
    func testParsesAndReadsValues() throws {
        let value = try JSON.parse(#"{"a":1,"b":"x","c":[true,null,2.5],"d":{"e":false}}"#)
        XCTAssertEqual(value.kind, .object)
        XCTAssertEqual(value["a"]?.intValue, 1)
        XCTAssertEqual(value["b"]?.stringValue, "x")
        XCTAssertEqual(value["c"]?.arrayElements.count, 3)
        XCTAssertEqual(value["c"]?.arrayElements[0].boolValue, true)
        XCTAssertEqual(value["c"]?.arrayElements[1].isNull, true)
        XCTAssertEqual(value["c"]?.arrayElements[2].doubleValue, 2.5)
        XCTAssertEqual(value["d"]?["e"]?.boolValue, false)
        XCTAssertNil(value["missing"])
        XCTAssertEqual(value.objectMembers.map(\.key), ["a", "b", "c", "d"])
    }

    func testParseErrorCarriesPosition() {
        XCTAssertThrowsError(try JSON.parse(#"{"a": [1, 2,}"#, what: "payload")) { error in
            guard case AppNorthError.invalidJSON(let message, let position) = error else {
                return XCTFail("wrong error \(error)")
            }
            XCTAssertEqual(position, 13)
            XCTAssertTrue(message.hasPrefix("payload is not valid JSON"), message)
            XCTAssertTrue(message.contains("line 1"), message)
        }
    }

    func testRejectsInvalidUTF8AndEmptyInput() {
        XCTAssertThrowsError(try JSON.parse([0x22, 0xFF, 0x22]))
        XCTAssertThrowsError(try JSON.parse([UInt8]()))
        XCTAssertThrowsError(try JSON.parseObject("[1]", what: "x"))
    }

    func testAcceptsTheNULEscapeButNotARawNULByte() throws {
        let escaped = try JSON.parse(#"{"s":"a\u0000b"}"#)
        XCTAssertEqual(escaped["s"]?.stringValue, "a\u{0}b")
        XCTAssertEqual(escaped.serialized(), #"{"s":"a\u0000b"}"#, "jansson writes it back escaped")
        XCTAssertNoThrow(try JSON.validateObject(#"{"s":"\u0000"}"#, what: "properties"))
        // jansson 2.14 alone accepts a raw NUL after a number or a literal.
        for text in ["{\"a\": 1\u{0}, \"b\": \"x\"}", "{\"a\": true\u{0}}", "{\"a\": \"x\u{0}y\"}", "\u{0}{}"] {
            XCTAssertThrowsError(try JSON.parse(text), text) {
                guard case AppNorthError.invalidJSON(let message, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains("NUL"), message)
            }
        }
        XCTAssertThrowsError(try ConfigDocument(text: "{\"a\": 1\u{0}, \"b\": \"x\"}", what: "config"))
    }

    func testBuildsAndSerializesCompactly() {
        let object = JSON.object()
        object.set("name", .string("héllo \"q\""))
        object.set("n", .int(42))
        let list = JSON.array()
        list.append(.bool(true))
        list.append(.null())
        object.set("list", list)
        XCTAssertEqual(object.serialized(), #"{"name":"héllo \"q\"","n":42,"list":[true,null]}"#)
        XCTAssertEqual(JSON.string("").serialized(), #""""#)
    }

    func testEqualityAndDeepCopy() throws {
        let a = try JSON.parse(#"{"x":[1,2]}"#)
        let b = a.deepCopy()
        XCTAssertTrue(a.isEqual(to: b))
        b.set("y", .int(1))
        XCTAssertFalse(a.isEqual(to: b))
    }
}
