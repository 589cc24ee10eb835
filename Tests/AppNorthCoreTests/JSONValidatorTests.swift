import CJansson
import XCTest
@testable import AppNorthCore

/// `JSONValidator` against jansson (`JSON.parse`), the reference it replaces
/// on the hot path: each input's verdict is stated, and both must give it.
final class JSONValidatorTests: XCTestCase {
    private static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// `{"k":"<bytes>"}`: raw bytes inside a string value.
    private static func inString(_ raw: [UInt8]) -> [UInt8] { bytes(#"{"k":""#) + raw + bytes(#""}"#) }

    private static func nested(_ open: String, _ close: String, _ count: Int, around inner: String) -> String {
        String(repeating: open, count: count) + inner + String(repeating: close, count: count)
    }

    /// (what, text, is it an object `track()` accepts, and without
    /// JSON_DECODE_INT_AS_REAL, is it valid JSON at all)
    private static let cases: [(String, [UInt8], Bool, Bool)] = {
        let limit = Int(JSON_PARSER_MAX_DEPTH)  // 2048 values deep, scalars counted
        let threshold = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792"
        let belowThreshold = String(threshold.dropLast()) + "1"
        var all: [(String, [UInt8], Bool, Bool)] = [
            // Shapes
            ("empty object", bytes("{}"), true, true),
            ("typical", bytes(#"{"screen":"home","price":9.99,"items":3,"premium":true,"ref":null}"#), true, true),
            ("duplicate keys", bytes(#"{"a":1,"a":2}"#), true, true),
            ("array at top", bytes("[1]"), false, true),
            ("string at top", bytes(#""s""#), false, true),
            ("number at top", bytes("1"), false, true),
            ("null at top", bytes("null"), false, true),
            ("empty input", [], false, false),
            ("only whitespace", bytes(" \n\t\r"), false, false),
            ("whitespace around", bytes(" \n\t\r{ \"a\" : [ 1 , 2 ] }\r\n\t "), true, true),
            ("form feed is not whitespace", [0x0C] + bytes("{}"), false, false),
            ("no-break space is not whitespace", bytes("\u{A0}{}"), false, false),
            ("byte order mark", [0xEF, 0xBB, 0xBF] + bytes("{}"), false, false),
            ("trailing garbage", bytes("{}x"), false, false),
            ("two objects", bytes("{} {}"), false, false),
            ("trailing comma at top", bytes("{},"), false, false),
            ("trailing comma in object", bytes(#"{"a":1,}"#), false, false),
            ("trailing comma in array", bytes(#"{"a":[1,]}"#), false, false),
            ("missing colon", bytes(#"{"a" 1}"#), false, false),
            ("key without value", bytes(#"{"a"}"#), false, false),
            ("number key", bytes(#"{1:2}"#), false, false),
            ("single quotes", bytes("{'a':1}"), false, false),
            ("unclosed object", bytes(#"{"a":1"#), false, false),
            ("unclosed string", bytes(#"{"a":"x"#), false, false),
            ("mismatched closers", bytes(#"{"a":[1,2}}"#), false, false),
            ("bracket closes object", bytes(#"{"a":1]"#), false, false),
            ("literals", bytes(#"{"t":true,"f":false,"n":null}"#), true, true),
            ("cut literal", bytes(#"{"a":tru}"#), false, false),
            ("capital literal", bytes(#"{"a":True}"#), false, false),
            ("long literal", bytes(#"{"a":nulls}"#), false, false),
            ("NaN", bytes(#"{"a":NaN}"#), false, false),
            ("Infinity", bytes(#"{"a":-Infinity}"#), false, false),
            // Raw NUL and control characters
            ("raw NUL after a number", bytes("{\"a\":1") + [0] + bytes("}"), false, false),
            ("raw NUL after a literal", bytes("{\"a\":true") + [0] + bytes("}"), false, false),
            ("raw NUL in a string", inString([0x78, 0, 0x79]), false, false),
            ("raw NUL first", [0] + bytes("{}"), false, false),
            ("raw NUL last", bytes("{}") + [0], false, false),
            ("control character", inString([0x01]), false, false),
            ("unit separator", inString([0x1F]), false, false),
            ("raw newline in a string", inString([0x0A]), false, false),
            ("raw tab in a string", inString([0x09]), false, false),
            ("DEL is fine", inString([0x7F]), true, true),
            // Escapes
            ("short escapes", bytes(#"{"k":"\" \\ \/ \b \f \n \r \t"}"#), true, true),
            ("NUL escape in a value", bytes(#"{"k":"a\u0000b"}"#), true, true),
            ("NUL escape in a key", bytes(#"{"a\u0000b":1}"#), false, false),
            ("NUL escape in a nested key", bytes(#"{"a":[{"\u0000":1}]}"#), false, false),
            ("unknown escape", bytes(#"{"k":"\x"}"#), false, false),
            ("capital U escape", bytes(#"{"k":"\U0041"}"#), false, false),
            ("bad hex digit", bytes(#"{"k":"\u12G4"}"#), false, false),
            ("short unicode escape", bytes(#"{"k":"\u12"}"#), false, false),
            ("escape at the end", bytes(#"{"k":"\"#), false, false),
            // Surrogates in \u escapes
            ("surrogate pair", bytes(#"{"k":"\uD83D\uDE00"}"#), true, true),
            ("surrogate pair, lower case", bytes(#"{"k":"\ud83d\ude00"}"#), true, true),
            ("highest pair", bytes(#"{"k":"\uDBFF\uDFFF"}"#), true, true),
            ("surrogate pair in a key", bytes(#"{"\uD83D\uDE00":1}"#), true, true),
            ("lone high surrogate", bytes(#"{"k":"\uD83D"}"#), false, false),
            ("lone high surrogate then text", bytes(#"{"k":"\uD83Dx"}"#), false, false),
            ("lone low surrogate", bytes(#"{"k":"\uDE00"}"#), false, false),
            ("high then non-surrogate", bytes(#"{"k":"\uD83D\u0041"}"#), false, false),
            ("high then high", bytes(#"{"k":"\uD83D\uD83D"}"#), false, false),
            ("high then backslash escape", bytes(#"{"k":"\uD83D\\uDE00"}"#), false, false),
            ("low then high", bytes(#"{"k":"\uDE00\uD83D"}"#), false, false),
            ("lone surrogate in a key", bytes(#"{"\uDFFF":1}"#), false, false),
            // UTF-8
            ("two, three and four bytes", inString(bytes("é€😀")), true, true),
            ("highest scalar U+10FFFF", inString([0xF4, 0x8F, 0xBF, 0xBF]), true, true),
            ("U+FFFF", inString([0xEF, 0xBF, 0xBF]), true, true),
            ("overlong slash C0 AF", inString([0xC0, 0xAF]), false, false),
            ("overlong C1 BF", inString([0xC1, 0xBF]), false, false),
            ("overlong three bytes", inString([0xE0, 0x80, 0xAF]), false, false),
            ("overlong four bytes", inString([0xF0, 0x80, 0x80, 0xAF]), false, false),
            ("above U+10FFFF", inString([0xF4, 0x90, 0x80, 0x80]), false, false),
            ("F5 lead byte", inString([0xF5, 0x80, 0x80, 0x80]), false, false),
            ("FF byte", inString([0xFF]), false, false),
            ("CESU-8 surrogate pair", inString([0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]), false, false),
            ("encoded lone surrogate", inString([0xED, 0xBF, 0xBF]), false, false),
            ("lone continuation byte", inString([0x80]), false, false),
            ("cut sequence", inString([0xE2, 0x82]), false, false),
            ("sequence cut by the end", bytes(#"{"k":""#) + [0xF0, 0x9F], false, false),
            ("valid character outside a string", bytes("{}é"), false, false),
            ("invalid byte outside a string", bytes("{\"a\":") + [0xC3] + bytes("}"), false, false),
            ("UTF-8 in a key", bytes(#"{"clé":1}"#), true, true),
            ("invalid UTF-8 in a key", bytes("{\"") + [0xC3, 0x28] + bytes("\":1}"), false, false),
            // Numbers
            ("Int64.max", bytes(#"{"n":9223372036854775807}"#), true, true),
            ("Int64.max + 1", bytes(#"{"n":9223372036854775808}"#), true, false),
            ("Int64.min", bytes(#"{"n":-9223372036854775808}"#), true, true),
            ("Int64.min - 1", bytes(#"{"n":-9223372036854775809}"#), true, false),
            ("20 digits", bytes(#"{"n":10000000000000000000}"#), true, false),
            ("a 400-digit integer", bytes(#"{"n":1\#(String(repeating: "0", count: 400))}"#), false, false),
            ("1e400", bytes(#"{"n":1e400}"#), false, false),
            ("-1e400", bytes(#"{"n":-1e400}"#), false, false),
            ("1e-400 (underflow is fine)", bytes(#"{"n":1e-400}"#), true, true),
            ("DBL_MAX", bytes(#"{"n":1.7976931348623157e308}"#), true, true),
            ("rounds down to DBL_MAX", bytes(#"{"n":1.7976931348623158e308}"#), true, true),
            ("rounds up to infinity", bytes(#"{"n":1.7976931348623159e308}"#), false, false),
            ("halfway to 2^1024 (ties to even: infinity)", bytes(#"{"n":\#(threshold).0}"#), false, false),
            ("just under halfway", bytes(#"{"n":\#(belowThreshold).0}"#), true, true),
            ("halfway, then more digits", bytes(#"{"n":\#(threshold).0000001}"#), false, false),
            ("halfway, spelled small with an exponent", bytes(#"{"n":0.000\#(threshold)e312}"#), false, false),
            ("1e308 as 0.1e309", bytes(#"{"n":0.1e309}"#), true, true),
            ("huge exponent on zero", bytes(#"{"n":0e99999999999999999999}"#), true, true),
            ("huge exponent on 0.000", bytes(#"{"n":0.000E+99999999999999999999}"#), true, true),
            ("huge exponent", bytes(#"{"n":1e99999999999999999999}"#), false, false),
            ("huge negative exponent", bytes(#"{"n":1e-99999999999999999999}"#), true, true),
            ("-0", bytes(#"{"n":-0}"#), true, true),
            ("-0.0", bytes(#"{"n":-0.0}"#), true, true),
            ("0", bytes(#"{"n":0}"#), true, true),
            ("exponent forms", bytes(#"{"a":1E+2,"b":1e-2,"c":1E2,"d":-0.5e0}"#), true, true),
            ("leading zero", bytes(#"{"n":01}"#), false, false),
            ("negative leading zero", bytes(#"{"n":-01}"#), false, false),
            ("two zeros", bytes(#"{"n":00}"#), false, false),
            ("leading point", bytes(#"{"n":.5}"#), false, false),
            ("trailing point", bytes(#"{"n":1.}"#), false, false),
            ("point then exponent", bytes(#"{"n":1.e5}"#), false, false),
            ("bare exponent", bytes(#"{"n":1e}"#), false, false),
            ("signed bare exponent", bytes(#"{"n":1e+}"#), false, false),
            ("plus sign", bytes(#"{"n":+1}"#), false, false),
            ("lone minus", bytes(#"{"n":-}"#), false, false),
            ("hex", bytes(#"{"n":0x10}"#), false, false),
            ("two points", bytes(#"{"n":1.5.3}"#), false, false),
            ("number then letter", bytes(#"{"n":1true}"#), false, false),
        ]
        // Nesting: the limit counts every value, scalars included.
        all += [
            ("arrays at the limit", bytes("{\"a\":" + nested("[", "]", limit - 1, around: "") + "}"), true, true),
            ("arrays one past the limit", bytes("{\"a\":" + nested("[", "]", limit, around: "") + "}"), false, false),
            ("a scalar at the limit", bytes("{\"a\":" + nested("[", "]", limit - 2, around: "1") + "}"), true, true),
            ("a scalar one past the limit", bytes("{\"a\":" + nested("[", "]", limit - 1, around: "1") + "}"), false, false),
            ("objects at the limit", bytes(nested("{\"a\":", "}", limit - 1, around: "{}")), true, true),
            ("objects one past the limit", bytes(nested("{\"a\":", "}", limit, around: "{}")), false, false),
            ("far past the limit, unclosed", bytes("{\"a\":" + String(repeating: "[", count: 100_000)), false, false),
        ]
        return all
    }()

    /// jansson's verdict, through the parse function the library used before.
    private static func jansson(_ text: [UInt8], integersAsReals: Bool) -> (valid: Bool, object: Bool) {
        let flags = integersAsReals ? size_t(JSON_DECODE_INT_AS_REAL) : 0
        guard let value = try? text.withUnsafeBytes({ try JSON.parse($0, flags: flags) }) else { return (false, false) }
        return (true, value.kind == .object)
    }

    private static func validator(_ text: [UInt8], integersAsReals: Bool) -> Result<JSONValidator.TopLevel, JSONValidator.Failure> {
        text.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONValidator.Failure) in try JSONValidator.validate(buffer, integersAsReals: integersAsReals) }
        }
    }

    func testEveryCaseAgreesWithJanssonAndWithItsStatedVerdict() {
        for (what, text, acceptedObject, strictValid) in Self.cases {
            for integersAsReals in [true, false] {
                let reference = Self.jansson(text, integersAsReals: integersAsReals)
                let verdict = Self.validator(text, integersAsReals: integersAsReals)
                let mode = integersAsReals ? "integers as reals" : "integers"
                switch verdict {
                case .success(let top):
                    XCTAssertTrue(reference.valid, "\(what) (\(mode)): the validator accepts what jansson refuses")
                    XCTAssertEqual(top == .object, reference.object, "\(what) (\(mode)): top-level kind")
                case .failure(let failure):
                    XCTAssertFalse(reference.valid, "\(what) (\(mode)): the validator refuses what jansson accepts: \(failure)")
                    XCTAssertTrue((0...text.count).contains(failure.position), "\(what): position \(failure.position)")
                }
            }
            XCTAssertEqual(Self.jansson(text, integersAsReals: true).object, acceptedObject, "\(what): jansson, as track() reads")
            XCTAssertEqual(Self.jansson(text, integersAsReals: false).valid, strictValid, "\(what): jansson, integers")
            // What track() runs: the validator behind validateObject.
            // What track() runs (a Swift string holds only valid UTF-8).
            let string = String(decoding: text, as: UTF8.self)
            if string.utf8.elementsEqual(text) {
                XCTAssertEqual((try? JSON.validateObject(string, what: "p")) != nil, acceptedObject, "\(what): validateObject")
                // What a config read with a default JSON text runs.
                XCTAssertEqual((try? JSON.validate(string, what: "p")) != nil, strictValid, "\(what): validate")
            }
        }
    }

    /// Strings are skipped eight bytes at a time: every byte value, at
    /// every offset in the word and near the end of the text, as jansson.
    func testEveryByteAtEveryOffsetInAString() {
        for offset in 0..<10 {
            for value in 0...255 {
                for tail in ["bcdefghijk\"}", "\"}"] {
                    let text = Self.bytes(#"{"k":""#) + [UInt8](repeating: 0x61, count: offset) + [UInt8(value)] + Self.bytes(tail)
                    let reference = Self.jansson(text, integersAsReals: true).valid
                    let verdict = (try? Self.validator(text, integersAsReals: true).get()) != nil
                    XCTAssertEqual(verdict, reference, "byte 0x\(String(value, radix: 16)) after \(offset) plain bytes, then \(tail)")
                }
            }
        }
    }

    func testMessagesSayWhatIsWrongAndWhere() {
        let expected: [(String, String)] = [
            (#"{"a":1,}"#, "string or '}' expected (line 1, column 8, byte 7)"),
            ("{\"a\":\n  [1, 2}", "']' expected (line 2, column 8, byte 13)"),
            (#"{"é":"\uD83D"}"#, #"invalid Unicode '\uD83D' (line 1, column 7, byte 7)"#),
            (#"{"n":1e400}"#, "real number overflow (line 1, column 6, byte 5)"),
            (#"{"a\u0000":1}"#, "NUL byte in object key not supported (line 1, column 4, byte 3)"),
            ("{\"a\":1\u{0}}", "a raw NUL byte (line 1, column 7, byte 6)"),
            ("{\"a\":\"x\u{1}\"}", "control character 0x1 in a string (line 1, column 8, byte 7)"),
            (#"{"a":01}"#, "invalid token (line 1, column 6, byte 5)"),
            (#"{"a":1"#, "premature end of input (line 1, column 7, byte 6)"),
            ("{} x", "end of file expected (line 1, column 4, byte 3)"),
            ("", "premature end of input (line 1, column 1, byte 0)"),
        ]
        for (text, message) in expected {
            XCTAssertThrowsError(try JSON.validateObject(text, what: "event properties"), text) {
                guard case AppNorthError.invalidJSON(let got, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertEqual(got, "event properties is not valid JSON: " + message)
            }
        }
        XCTAssertThrowsError(try JSON.validateObject("[1]", what: "event properties")) {
            guard case AppNorthError.invalidJSON(let got, let position) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(got, "event properties must be a JSON object")
            XCTAssertEqual(position, 0)
        }
        let invalid: [UInt8] = Array(#"{"k":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8)
        XCTAssertThrowsError(try invalid.withUnsafeBufferPointer { try JSONValidator.validate($0, what: "p", integersAsReals: true) }) {
            guard case AppNorthError.invalidJSON(let got, let position) = $0 else { return XCTFail("\($0)") }
            XCTAssertEqual(got, "p is not valid JSON: unable to decode byte 0xed as UTF-8 (line 1, column 7, byte 6)")
            XCTAssertEqual(position, 6)
        }
    }
}
