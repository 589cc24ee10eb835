/// The shape most event properties have, recognised in one tight pass: a
/// single object of plain keys and plain scalar values,
/// `{"k":"v", "n":-1.5, "b":true, "z":null}`. Plain: strings of printable
/// ASCII without escapes, numbers without exponent and with fewer than 19
/// integer digits (which neither a double nor an Int64 overflows), at most
/// one space after a comma or colon, and nothing nested.
///
/// It only ever says yes to text `JSONValidator.Scanner` accepts as an
/// object (a subset of its grammar); on anything else it says no, and the
/// scanner judges the text, so verdicts and messages are the scanner's.
extension JSONValidator {
    @inline(__always)
    static func isPlainFlatObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= 2, base[0] == UInt8(ascii: "{") else { return false }
        let end = bytes.count
        if end == 2 { return base[1] == UInt8(ascii: "}") }
        var k = 1
        while true {
            // A key.
            guard k < end, base[k] == UInt8(ascii: "\"") else { return false }
            k = plainStringEnd(base, end, k + 1)
            guard k < end, base[k] == UInt8(ascii: ":") else { return false }
            k += 1
            if k < end && base[k] == UInt8(ascii: " ") { k += 1 }
            // A value.
            guard k < end else { return false }
            switch base[k] {
            case UInt8(ascii: "\""): k = plainStringEnd(base, end, k + 1)
            case UInt8(ascii: "t"): k = word(base, end, k, "true")
            case UInt8(ascii: "f"): k = word(base, end, k, "false")
            case UInt8(ascii: "n"): k = word(base, end, k, "null")
            default: k = plainNumberEnd(base, end, k)
            }
            // A comma and the next key, or the end.
            guard k < end else { return false }
            if base[k] == UInt8(ascii: "}") { return k + 1 == end }
            guard base[k] == UInt8(ascii: ",") else { return false }
            k += 1
            if k < end && base[k] == UInt8(ascii: " ") { k += 1 }
        }
    }

    /// Past the closing quote of a plain string whose content starts at
    /// `k`; `end` (which no caller accepts) when it is not plain.
    @inline(__always)
    private static func plainStringEnd(_ base: UnsafePointer<UInt8>, _ end: Int, _ start: Int) -> Int {
        var k = start
        let raw = UnsafeRawPointer(base)
        while end - k >= 8 {
            let special = specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: k, as: UInt64.self)))
            if special == 0 {
                k += 8
                continue
            }
            k += special.trailingZeroBitCount >> 3
            return base[k] == UInt8(ascii: "\"") ? k + 1 : end
        }
        while k < end && isPlain(base[k]) { k += 1 }
        return k < end && base[k] == UInt8(ascii: "\"") ? k + 1 : end
    }

    /// Past `-?(0|[1-9][0-9]{0,17})(\.[0-9]+)?` at `k`; `end` when the
    /// number is not of that form.
    @inline(__always)
    private static func plainNumberEnd(_ base: UnsafePointer<UInt8>, _ end: Int, _ start: Int) -> Int {
        var k = start
        if base[k] == UInt8(ascii: "-") { k += 1 }
        let integer = k
        guard k < end, isDigit(base[k]) else { return end }
        if base[k] == UInt8(ascii: "0") {
            k += 1
        } else {
            while k < end && isDigit(base[k]) { k += 1 }
        }
        guard k - integer < 19 else { return end }
        if k < end && base[k] == UInt8(ascii: ".") {
            k += 1
            guard k < end, isDigit(base[k]) else { return end }
            while k < end && isDigit(base[k]) { k += 1 }
        }
        // An exponent, or a digit after a leading zero, is the scanner's.
        guard k < end, !isDigit(base[k]), base[k] != UInt8(ascii: "e"), base[k] != UInt8(ascii: "E") else { return end }
        return k
    }

    /// Past `literal` at `k`; `end` when it is not there.
    @inline(__always)
    private static func word(_ base: UnsafePointer<UInt8>, _ end: Int, _ k: Int, _ literal: StaticString) -> Int {
        let count = literal.utf8CodeUnitCount
        guard end - k >= count else { return end }
        for j in 0..<count where base[k + j] != literal.utf8Start[j] { return end }
        return k + count
    }
}
