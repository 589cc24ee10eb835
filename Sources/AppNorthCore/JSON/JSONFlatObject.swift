/// The shape most event properties have, recognised in one tight pass: a
/// single object of plain keys and plain scalar values,
/// `{"k":"v", "n":-1.5, "b":true, "z":null}`. Plain: strings of printable
/// ASCII without escapes, numbers without exponent and with fewer than 19
/// integer digits (which neither a double nor an Int64 overflows), at most
/// one space after a comma or colon, and nothing nested.
///
/// It only ever says yes to text `JSONScanner` accepts as an
/// object (a subset of its grammar); on anything else it says no, and the
/// scanner judges the text, so verdicts and messages are the scanner's.
///
/// The text must end with `}` before anything else is looked at: no step
/// can then run past it (every token stops at a byte that is not `}`, or
/// at `}`), so only the strings' 8-byte loads and the literals check the
/// end. A byte is read at `k` only while `k < end`.
enum JSONFlatObject {
    @inline(__always)
    static func matches(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= 2, base[0] == UInt8(ascii: "{"),
              base[bytes.count &- 1] == UInt8(ascii: "}") else { return false }
        let end = bytes.count
        if end == 2 { return true }
        var k = 1
        while true {
            // A key, its colon and at most one space: k < end, as the last byte is `}`.
            guard base[k] == UInt8(ascii: "\"") else { return false }
            k = stringEnd(base, end, k &+ 1)
            guard k != 0, base[k] == UInt8(ascii: ":") else { return false }
            k &+= 1
            if base[k] == UInt8(ascii: " ") { k &+= 1 }
            // A value.
            switch base[k] {
            case UInt8(ascii: "\""): k = stringEnd(base, end, k &+ 1)
            case UInt8(ascii: "t"): k = word(base, end, k, 0x6575_7274, 4)  // "true"
            case UInt8(ascii: "f"): k = word(base, end, k, 0x736C_6166, 5)  // "fals", then "e"
            case UInt8(ascii: "n"): k = word(base, end, k, 0x6C6C_756E, 4)  // "null"
            default: k = numberEnd(base, k)
            }
            // A comma and the next key, or the end.
            guard k != 0 else { return false }
            if base[k] == UInt8(ascii: "}") { return k &+ 1 == end }
            guard base[k] == UInt8(ascii: ",") else { return false }
            k &+= 1
            if base[k] == UInt8(ascii: " ") { k &+= 1 }
        }
    }

    /// Past the closing quote of a plain string whose content starts at
    /// `start`; 0 when it is not plain. The quote is never the last byte
    /// (`}`), so what it returns is below `end`.
    @inline(__always)
    private static func stringEnd(_ base: UnsafePointer<UInt8>, _ end: Int, _ start: Int) -> Int {
        var k = start
        let raw = UnsafeRawPointer(base)
        while end &- k >= 8 {
            let special = JSONValidator.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: k, as: UInt64.self)))
            if special == 0 {
                k &+= 8
                continue
            }
            k &+= special.trailingZeroBitCount >> 3
            return base[k] == UInt8(ascii: "\"") ? k &+ 1 : 0
        }
        while k < end && JSONValidator.isPlain(base[k]) { k &+= 1 }
        return k < end && base[k] == UInt8(ascii: "\"") ? k &+ 1 : 0
    }

    /// Past `-?(0|[1-9][0-9]{0,17})(\.[0-9]+)?` at `k`; 0 when the number
    /// is not of that form. Digits stop at the last byte (`}`) at the latest.
    @inline(__always)
    private static func numberEnd(_ base: UnsafePointer<UInt8>, _ start: Int) -> Int {
        var k = start
        if base[k] == UInt8(ascii: "-") { k &+= 1 }
        let integer = k
        guard JSONValidator.isDigit(base[k]) else { return 0 }
        if base[k] == UInt8(ascii: "0") {
            k &+= 1
        } else {
            while JSONValidator.isDigit(base[k]) { k &+= 1 }
        }
        guard k &- integer < 19 else { return 0 }
        if base[k] == UInt8(ascii: ".") {
            k &+= 1
            guard JSONValidator.isDigit(base[k]) else { return 0 }
            while JSONValidator.isDigit(base[k]) { k &+= 1 }
        }
        // An exponent, or a digit after a leading zero, is the scanner's.
        let next = base[k]
        guard !JSONValidator.isDigit(next), next != UInt8(ascii: "e"), next != UInt8(ascii: "E") else { return 0 }
        return k
    }

    /// Past the literal of `count` bytes (4, or 5 for `false`) whose first
    /// four read `first4` as a little-endian word; 0 when it is not there.
    /// It must end before the last byte (`}`), so the load stays inside.
    @inline(__always)
    private static func word(_ base: UnsafePointer<UInt8>, _ end: Int, _ k: Int, _ first4: UInt32, _ count: Int) -> Int {
        guard end &- k > count,
              UInt32(littleEndian: UnsafeRawPointer(base).loadUnaligned(fromByteOffset: k, as: UInt32.self)) == first4,
              count == 4 || base[k &+ 4] == UInt8(ascii: "e")
        else { return 0 }
        return k &+ count
    }
}
