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
/// end. A byte is read at `p` only while `p < end`. A step that fails
/// returns `base`, where the text has `{`: the check of the byte that must
/// follow (`:`, `,` or `}`) then fails, with no test of its own.
enum JSONFlatObject {
    typealias Pointer = UnsafePointer<UInt8>

    @inline(__always)
    static func matches(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= 2, base[0] == UInt8(ascii: "{"),
              base[bytes.count &- 1] == UInt8(ascii: "}") else { return false }
        if bytes.count == 2 { return true }
        guard base[1] == UInt8(ascii: "\"") else { return false }
        let text = Text(base: base, count: bytes.count)
        var p = base + 2  // in the first key
        while true {
            // A key and its colon, at most one space, a value.
            p = text.keyEnd(p)
            if p.pointee == UInt8(ascii: " ") { p += 1 }
            let first = p.pointee
            p = first == UInt8(ascii: "\"") ? text.stringEnd(p + 1) : text.scalarEnd(p, first)
            // A comma, at most one space and the next key's quote; or the end.
            guard p.pointee == UInt8(ascii: ",") else { return p.pointee == UInt8(ascii: "}") && p + 1 == text.end }
            if p[1] == UInt8(ascii: "\"") {
                p += 2
            } else {
                guard p[1] == UInt8(ascii: " "), p[2] == UInt8(ascii: "\"") else { return false }
                p += 3
            }
        }
    }

    /// The text's bounds: `lastWord` is the address of its last 8 bytes
    /// (below `base` when it is shorter).
    struct Text {
        let base: Pointer
        let end: Pointer
        let lastWord: Int

        @inline(__always)
        init(base: Pointer, count: Int) {
            self.base = base
            self.end = base + count
            self.lastWord = Int(bitPattern: base) &+ count &- 8
        }

        @inline(__always)
        private func load(_ p: Pointer) -> UInt64 {
            UInt64(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt64.self))
        }

        /// Past the `":` that ends the plain key whose content starts at
        /// `start`. The first byte that is not plain must be its quote; that
        /// is never the last byte (`}` is plain), so the two bytes read are inside.
        /// `stringEnd`'s loop, kept apart for the one 16-bit compare of `":`:
        /// written as `stringEnd` and a colon check, `track()` cost 15
        /// instructions more a call (callgrind, 2,151 against 2,136).
        @inline(__always)
        func keyEnd(_ start: Pointer) -> Pointer {
            var p = start
            while Int(bitPattern: p) <= lastWord {
                let special = JSONValidator.specialBytes(load(p))
                if special != 0 {
                    p += special.trailingZeroBitCount &>> 3
                    let two = UInt16(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt16.self))
                    return two == 0x3A22 ? p + 2 : base  // `":`
                }
                p += 8
            }
            p = tailStringEnd(p)
            return p.pointee == UInt8(ascii: ":") ? p + 1 : base
        }

        /// Past the closing quote of the plain string value whose content
        /// starts at `start`. It is never the last byte, so what this returns is below `end`.
        @inline(__always)
        func stringEnd(_ start: Pointer) -> Pointer {
            var p = start
            while Int(bitPattern: p) <= lastWord {
                let special = JSONValidator.specialBytes(load(p))
                if special != 0 {
                    p += special.trailingZeroBitCount &>> 3
                    return p.pointee == UInt8(ascii: "\"") ? p + 1 : base
                }
                p += 8
            }
            return tailStringEnd(p)
        }

        /// `stringEnd` for the last 0 to 7 bytes: the text's last word
        /// shifted down to `p`, zeros above its end (special, and not a
        /// quote), so the first special byte is read from the word.
        @inline(__always)
        private func tailStringEnd(_ p: Pointer) -> Pointer {
            let left = end - p
            guard left > 0 else { return base }  // the last word had no quote
            guard end - base >= 8 else { return shortStringEnd(p) }
            let word = load(end - 8) &>> UInt64(truncatingIfNeeded: (8 &- left) &<< 3)  // 8 to 56 bits
            let bit = JSONValidator.specialBytes(word).trailingZeroBitCount & ~7
            guard UInt8(truncatingIfNeeded: word &>> UInt64(truncatingIfNeeded: bit)) == UInt8(ascii: "\"") else { return base }
            return p + (bit &>> 3) + 1
        }

        /// `stringEnd` in a text shorter than a word, a byte at a time.
        private func shortStringEnd(_ start: Pointer) -> Pointer {
            var p = start
            while p < end && JSONValidator.isPlain(p.pointee) { p += 1 }
            return p < end && p.pointee == UInt8(ascii: "\"") ? p + 1 : base
        }

        /// Past the literal or number that starts with `first` at `p`.
        @inline(__always)
        func scalarEnd(_ p: Pointer, _ first: UInt8) -> Pointer {
            switch first {
            case UInt8(ascii: "t"): return literal(p, 0x6575_7274, 4)  // "true"
            case UInt8(ascii: "f"): return literal(p, 0x736C_6166, 5)  // "fals", then "e"
            case UInt8(ascii: "n"): return literal(p, 0x6C6C_756E, 4)  // "null"
            default: return numberEnd(p)
            }
        }

        /// Past `-?(0|[1-9][0-9]{0,17})(\.[0-9]+)?` at `start`. Digits stop
        /// at the last byte (`}`) at the latest. What follows is the
        /// caller's to check (`,` or `}`): an exponent, or a digit after a
        /// leading zero, fails there and goes to the scanner.
        @inline(__always)
        private func numberEnd(_ start: Pointer) -> Pointer {
            var p = start
            if p.pointee == UInt8(ascii: "-") { p += 1 }
            let integer = p
            guard JSONValidator.isDigit(p.pointee) else { return base }
            p += 1
            if integer.pointee != UInt8(ascii: "0") {
                while JSONValidator.isDigit(p.pointee) { p += 1 }
                guard p - integer < 19 else { return base }
            }
            if p.pointee == UInt8(ascii: ".") {
                p += 1
                guard JSONValidator.isDigit(p.pointee) else { return base }
                repeat { p += 1 } while JSONValidator.isDigit(p.pointee)
            }
            return p
        }

        /// Past the literal of `count` bytes (4, or 5 for `false`) whose
        /// first four read `first4` as a little-endian word. It must end
        /// before the last byte (`}`), so the load stays inside.
        @inline(__always)
        private func literal(_ p: Pointer, _ first4: UInt32, _ count: Int) -> Pointer {
            guard end - p > count,
                  UInt32(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt32.self)) == first4,
                  count == 4 || p[4] == UInt8(ascii: "e")
            else { return base }
            return p + count
        }
    }
}
