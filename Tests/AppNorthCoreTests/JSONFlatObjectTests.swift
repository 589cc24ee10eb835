import XCTest
@testable import AppNorthCore

/// `JSONFlatObject.matches` may only say yes where the scanner
/// accepts an object: checked on generated near-miss texts, and on the
/// shapes it is there for.
final class JSONFlatObjectTests: XCTestCase {
    func scannerVerdict(_ text: [UInt8], integersAsReals: Bool) -> JSONValidator.TopLevel? {
        text.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(bytes: buffer, integersAsReals: integersAsReals)
            return try? scanner.document()
        }
    }

    func fast(_ text: [UInt8]) -> Bool {
        text.withUnsafeBufferPointer { JSONFlatObject.matches($0) }
    }

    func testTheShapesItIsForAreRecognised() {
        for text in [#"{}"#, #"{"a":1}"#, #"{"screen":"home","price":9.99,"items":3,"premium":true,"ref":"campaign-42"}"#,
                     #"{"a": -0.5, "b": null, "c": false, "": ""}"#, #"{"n":123456789012345678}"#,
                     #"{"a":false,"b":null}"#, #"{"a":0}"#, #"{"a":"}"}"#] {
            XCTAssertTrue(fast(Array(text.utf8)), text)
            XCTAssertEqual(scannerVerdict(Array(text.utf8), integersAsReals: true), .object, text)
        }
        for text in [#"{"a":1e5}"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":-}"#, #"{"a":"\n"}"#, #"{"a":"é"}"#, #"{"a":[1]}"#,
                     #"{"a":{}}"#, #"{"a":1,}"#, #"{"a":1} "#, #"{ "a":1}"#, #"{"a" :1}"#, #"{"a":1234567890123456789}"#,
                     #"{"a":tru}"#, #"{"a":truex}"#, #"{"a":1"#, #"{"a""#, #"{"#, #"[]"#, #""#, #"{"a":"x\"y"}"#,
                     #"{"a":f}"#, #"{"a":fals}"#, #"{"a":falsx}"#, #"{"a":nul}"#, #"{"a":t}"#, #"{"a":"}"#, #"{"}"#,
                     #"{"a}"#, #"{"a":}"#, #"{,}"#, #"{"a":1,"#, #"{"a":true"#, #"}"#, #"{}}"#] {
            XCTAssertFalse(fast(Array(text.utf8)), text)
        }
    }

    /// Random texts from JSON's bytes and near misses: every yes must be
    /// the scanner's object, in both number modes.
    func testEveryYesIsTheScannersObject() {
        let pieces: [String] = ["{", "}", "\"", "\"a\"", "\"k\":", ":", ",", " ", ", ", ": ", "1", "0", "-", ".", "5", "e", "E",
                                "+", "true", "false", "null", "tru", "[", "]", "\\", "\\\"", "\u{01}", "\n", "é", "x",
                                "12345678901234567", "99999999999999999999", "\"v\"", "\u{0}"]
        var rng = SeededGenerator("testEveryYesIsTheScannersObject")
        var yes = 0
        for _ in 0..<40_000 {
            var text: [UInt8] = Array("{\"k\":".utf8)
            for _ in 0..<Int.random(in: 0...8, using: &rng) {
                text += Array(pieces[Int.random(in: 0..<pieces.count, using: &rng)].utf8)
            }
            if Bool.random(using: &rng) { text += Array("}".utf8) }
            guard fast(text) else { continue }
            yes += 1
            let shown = String(decoding: text, as: UTF8.self)
            XCTAssertEqual(scannerVerdict(text, integersAsReals: true), .object, shown)
            XCTAssertEqual(scannerVerdict(text, integersAsReals: false), .object, shown)
        }
        XCTAssertGreaterThan(yes, 100, "the generator reaches the fast path")
    }
}
