import XCTest
@testable import AppNorthCore

/// EventPayload's writers, pure: the bytes they lay out. The JSON string
/// writer copies eight bytes at a time and the timestamp's digits go as
/// three words: they give exactly the bytes of the plain byte-by-byte rules.
final class EventPayloadTests: XCTestCase {
    /// RFC 8259 escapes, one byte at a time: what writeString must equal.
    static func reference(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        let hex = Array("0123456789abcdef".utf8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case ..<0x20: out += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        return out + [UInt8(ascii: "\"")]
    }

    /// writeString into exactly the room it is promised (6 per byte and
    /// the quotes), with a guard byte after it that must survive.
    static func written(_ bytes: [UInt8]) -> [UInt8] {
        let room = 6 * bytes.count + 2
        var out = [UInt8](repeating: 0xEE, count: room + 1)
        let n = bytes.withUnsafeBufferPointer { b in
            out.withUnsafeMutableBufferPointer { EventPayload.writeString(b, to: $0.baseAddress!) }
        }
        XCTAssertEqual(out[room], 0xEE, "wrote past its room")
        return Array(out[0..<n])
    }

    func testEveryLengthWithAnEscapeAtEveryPlace() {
        // Lengths 0-40 (the word loop, the last word, the byte loop), one
        // byte to escape (or a UTF-8 byte, which is not) at each position.
        let escapes: [UInt8] = [0x00, 0x01, 0x09, 0x0A, 0x1F, 0x22, 0x5C, 0x7F, 0x80, 0xC3, 0xFF]
        for length in 0...40 {
            let plain = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            XCTAssertEqual(Self.written(plain), Self.reference(plain), "plain \(length)")
            for at in 0..<length {
                for byte in escapes {
                    var bytes = plain
                    bytes[at] = byte
                    XCTAssertEqual(Self.written(bytes), Self.reference(bytes), "length \(length), \(byte) at \(at)")
                }
            }
        }
    }

    func testRandomBytesWithManyEscapes() {
        var random = SeededGenerator("testRandomBytesWithManyEscapes")
        // Bytes drawn mostly from those near the escaped ones, so words
        // hold several escapes and borrows run between them.
        let pool: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF,
                             UInt8(ascii: "a"), UInt8(ascii: "z")]
        for _ in 0..<5_000 {
            let bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in pool.randomElement(using: &random)! }
            XCTAssertEqual(Self.written(bytes), Self.reference(bytes), "\(bytes)")
        }
    }

    func testEveryTimestampIsSpelledOut() throws {
        // writeDigits stores 24 bytes; the identity tail is written over
        // the ones past the digits. -1 too: EventStamp starts rendered (as -1 ms); before, a first
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
