/// Finds the exact text of values inside JSON text, so that documents the
/// SDK forwards unchanged (config documents and their members) keep the
/// spelling they were served with: jansson would print `9.99` back as
/// `9.9900000000000002`.
///
/// The text must already have been validated (parse it with `JSON.parse`
/// first); on malformed input these functions return nil rather than trap.
public enum JSONText {
    /// The range of the one value in `bytes`, without surrounding whitespace.
    public static func valueRange(_ bytes: [UInt8]) -> Range<Int> {
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
    public static func objectMembers(_ bytes: [UInt8], in range: Range<Int>? = nil)
        -> [(key: String, value: Range<Int>)]? {
        var scanner = Scanner(bytes: bytes, position: range?.lowerBound ?? 0, end: range?.upperBound ?? bytes.count)
        scanner.skipSpace()
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        var members: [(key: String, value: Range<Int>)] = []
        scanner.skipSpace()
        if scanner.take(UInt8(ascii: "}")) { return members }
        while true {
            scanner.skipSpace()
            guard let key = scanner.string() else { return nil }
            scanner.skipSpace()
            guard scanner.take(UInt8(ascii: ":")) else { return nil }
            scanner.skipSpace()
            let start = scanner.position
            guard scanner.skipValue() else { return nil }
            members.append((key, start..<scanner.position))
            scanner.skipSpace()
            if scanner.take(UInt8(ascii: ",")) { continue }
            if scanner.take(UInt8(ascii: "}")) { return members }
            return nil
        }
    }

    static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position: Int
        let end: Int

        var current: UInt8? { position < end ? bytes[position] : nil }

        mutating func skipSpace() {
            while let b = current, JSONText.isSpace(b) { position += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            position += 1
            return true
        }

        /// Skips one value of any kind.
        mutating func skipValue() -> Bool {
            guard let first = current else { return false }
            switch first {
            case UInt8(ascii: "\""):
                return skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while let b = current {
                    switch b {
                    case UInt8(ascii: "\""):
                        guard skipString() else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["):
                        depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { position += 1; return true }
                    default:
                        break
                    }
                    position += 1
                }
                return false
            default:
                // A number, true, false or null: up to the next delimiter.
                let start = position
                while let b = current, !JSONText.isSpace(b), b != UInt8(ascii: ","),
                      b != UInt8(ascii: "}"), b != UInt8(ascii: "]") {
                    position += 1
                }
                return position > start
            }
        }

        mutating func skipString() -> Bool {
            guard take(UInt8(ascii: "\"")) else { return false }
            while let b = current {
                position += 1
                if b == UInt8(ascii: "\\") { position += 1; continue }
                if b == UInt8(ascii: "\"") { return true }
            }
            return false
        }

        /// Reads a string and unescapes it.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var out: [UInt8] = []
            while let b = current {
                position += 1
                switch b {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let e = current else { return nil }
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
                            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(),
                                  (0xDC00...0xDFFF).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { return nil }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default: out.append(e)  // \" \\ \/
                    }
                default:
                    out.append(b)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard position + 4 <= end else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[position]
                position += 1
                let digit: UInt32
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
                default: return nil
                }
                value = value << 4 | digit
            }
            return value
        }
    }
}
