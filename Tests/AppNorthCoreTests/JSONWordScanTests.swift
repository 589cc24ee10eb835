import CJansson
import XCTest
@testable import AppNorthCore

/// Strings are scanned eight bytes at a time (`JSONValidator.specialBytes`,
/// in `JSONFlatObject` and `JSONScanner`), and the flat path reads the
/// text's last word shifted: special bytes, escapes and multibyte UTF-8 at
/// every offset of a word and of the text's end, against jansson.
final class JSONWordScanTests: XCTestCase {
    private static func jansson(_ text: [UInt8], integersAsReals: Bool) -> (valid: Bool, object: Bool) {
        let flags = integersAsReals ? size_t(JSON_DECODE_INT_AS_REAL) : 0
        guard let value = try? text.withUnsafeBytes({ try JSON.parse($0, flags: flags) }) else { return (false, false) }
        return (true, value.kind == .object)
    }

    /// Each byte value at each position, with plain bytes below it and any
    /// byte at any position above: the lowest set bit is the first byte
    /// that is not plain, exactly, and nothing is set when all are plain.
    func testSpecialBytesMarksTheFirstByteThatIsNotPlainExactly() {
        let plain = (0...255).map(UInt8.init).filter(JSONValidator.isPlain)
        var failures = 0
        for i in 0..<8 {
            for x in 0...255 {
                for j in i..<8 {
                    for y in 0...255 where j > i || y == x {
                        var word: UInt64 = 0
                        for k in 0..<8 {
                            let byte = k == j ? UInt8(y) : k == i ? UInt8(x) : plain[(k &* 31 &+ x &+ y) % plain.count]
                            word |= UInt64(byte) << UInt64(8 * k)
                        }
                        let first = !JSONValidator.isPlain(UInt8(x)) ? i : !JSONValidator.isPlain(UInt8(y)) ? j : nil
                        let special = JSONValidator.specialBytes(word)
                        let got = special == 0 ? nil : special.trailingZeroBitCount
                        if got != first.map({ $0 * 8 + 7 }) {
                            failures += 1
                            if failures < 10 { XCTFail("word \(String(word, radix: 16)): first special \(String(describing: first)), bit \(String(describing: got))") }
                        }
                    }
                }
            }
        }
        XCTAssertEqual(failures, 0)
    }

    /// What goes in a string: escapes (also cut by the closing quote),
    /// control bytes, DEL, UTF-8 of two to four bytes, and bytes that are
    /// not UTF-8 (cut, overlong, surrogate, above U+10FFFF, lone continuation).
    private static let inserts: [[UInt8]] = [
        #"""#, #"\""#, #"\\"#, #"\n"#, #"\/"#, #"\u00e9"#, #"\u0000"#, #"\ud83d\ude00"#, #"\ud83d"#, #"\x"#, #"\"#, #"\u12"#,
        "é", "€", "😀", "aé€😀b",
    ].map { Array($0.utf8) } + [
        [0x00], [0x01], [0x09], [0x0A], [0x1F], [0x20], [0x7F], [0x80], [0xBF], [0xC3], [0xC0, 0x80], [0xE2, 0x82],
        [0xED, 0xA0, 0x80], [0xF0, 0x9F, 0x98], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF],
    ]

    /// The insert after 0 to 11 plain bytes and before 0 to 9 more, in a
    /// key and in a value, with other members after it or not (so the
    /// string ends in the text's last word or before it): the validator
    /// (flat path, then scanner) gives jansson's verdict, in both number
    /// modes, and the flat path says yes only to jansson's objects.
    func testSpecialBytesAtEveryOffsetOfAWordAndOfTheEnd() {
        let shapes: [([UInt8], [UInt8])] = [
            (Array(#"{""#.utf8), Array(#"":1}"#.utf8)), (Array(#"{""#.utf8), Array(#"": "v", "x":true}"#.utf8)),
            (Array(#"{"k":""#.utf8), Array(#""}"#.utf8)), (Array(#"{"k": ""#.utf8), Array(#"","n":-0.5}"#.utf8)),
            (Array(#"{"a":null, ""#.utf8), Array(#"":false}"#.utf8)),
        ]
        var fast = 0
        var accepted = 0
        for insert in Self.inserts {
            for before in 0..<12 {
                for after in 0..<10 {
                    let content = [UInt8](repeating: 0x61, count: before) + insert + [UInt8](repeating: 0x62, count: after)
                    for (head, tail) in shapes {
                        let text = head + content + tail
                        let shown = String(decoding: text, as: UTF8.self)
                        let flat = text.withUnsafeBufferPointer { JSONFlatObject.matches($0) }
                        for integersAsReals in [true, false] {
                            let reference = Self.jansson(text, integersAsReals: integersAsReals)
                            let top = text.withUnsafeBufferPointer { try? JSONValidator.validate($0, integersAsReals: integersAsReals) }
                            XCTAssertEqual(top != nil, reference.valid, shown)
                            XCTAssertEqual(top == .object, reference.object, shown)
                            if flat { XCTAssertTrue(reference.object, "the flat path accepts \(shown)") }
                            if reference.object { accepted += 1 }
                        }
                        if flat { fast += 1 }
                    }
                }
            }
        }
        XCTAssertGreaterThan(fast, 1_000, "texts the flat path took")
        XCTAssertGreaterThan(accepted, 10_000, "texts jansson accepts")
    }

    /// Texts shorter than a word (read a byte at a time) and at every
    /// length around it, with the closing quote at each place.
    func testShortTextsAndTheFirstWord() {
        for length in 0..<12 {
            let key = [UInt8](repeating: 0x6B, count: length)
            for text in [Array(#"{""#.utf8) + key + Array(#"":1}"#.utf8), Array(#"{"":""#.utf8) + key + Array(#""}"#.utf8),
                         Array(#"{""#.utf8) + key + Array(#"}"#.utf8), Array(#"{"":""#.utf8) + key + Array(#"}"#.utf8),
                         Array(#"{""#.utf8) + key + Array(#"":}"#.utf8)] {
                let shown = String(decoding: text, as: UTF8.self)
                let flat = text.withUnsafeBufferPointer { JSONFlatObject.matches($0) }
                let reference = Self.jansson(text, integersAsReals: true)
                XCTAssertEqual(flat, reference.object, shown)
                let top = text.withUnsafeBufferPointer { try? JSONValidator.validate($0, integersAsReals: true) }
                XCTAssertEqual(top == .object, reference.object, shown)
            }
        }
    }
}
