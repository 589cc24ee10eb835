import XCTest
@testable import AppNorth

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
