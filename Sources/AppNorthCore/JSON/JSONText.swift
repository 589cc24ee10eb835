/// Finds the exact text of values inside JSON text, so that documents the
/// SDK forwards unchanged (config documents and their members) keep the
/// spelling they were served with: jansson would print `9.99` back as
/// `9.9900000000000002`.
///
/// The text must already have been validated (parse it with `JSON.parse`
/// first); on malformed input these functions return nil rather than trap.
package enum JSONText {
    /// The range of the one value in `bytes`, without surrounding whitespace.
    package static func valueRange(_ bytes: [UInt8]) -> Range<Int> {
        var start = 0
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return start..<end
    }

    /// The members of the object that `bytes[range]` holds, in text order:
    /// each key (unescaped) and the exact range of its value. A key that
    /// appears twice is listed twice (jansson keeps the last). nil when the
    /// range does not hold an object.
    package static func objectMembers(_ bytes: [UInt8], in range: Range<Int>? = nil)
        -> [(key: String, value: Range<Int>)]? {
        bytes.withUnsafeBufferPointer { buffer -> [(key: String, value: Range<Int>)]? in
            var walker = JSONMemberWalker(buffer, in: range)
            var members: [(key: String, value: Range<Int>)] = []
            while let member = walker.next() {
                guard let key = unescaped(buffer, member.key) else { return nil }
                members.append((key, member.value))
            }
            return walker.malformed ? nil : members
        }
    }

    static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    /// The string whose text (between its quotes) is `bytes[range]`,
    /// unescaped; nil at a malformed escape.
    static func unescaped(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String? {
        var out: [UInt8] = []
        var position = range.lowerBound
        let end = min(range.upperBound, bytes.count)
        func hex4() -> UInt32? {
            guard position + 4 <= end else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = JSONValidator.hexValue(bytes[position]) else { return nil }
                position += 1
                value = value << 4 | digit
            }
            return value
        }
        while position < end {
            let b = bytes[position]
            position += 1
            guard b == UInt8(ascii: "\\") else {
                out.append(b)
                continue
            }
            guard position < end else { return nil }
            let e = bytes[position]
            position += 1
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4() else { return nil }
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate must be followed by \u low surrogate.
                    guard position + 2 <= end, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
                    else { return nil }
                    position += 2
                    guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let unicode = Unicode.Scalar(scalar) else { return nil }
                out.append(contentsOf: Array(String(Character(unicode)).utf8))
            default: out.append(e)  // \" \\ \/
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
