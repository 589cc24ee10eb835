import CJansson

/// Judges JSON text exactly as `JSON.parse` does, without building a tree
/// and without allocating: one pass over the bytes. The host's event
/// properties are checked here on every `track()`; parsing them with
/// jansson only to throw the tree away cost about 16,000 instructions.
///
/// The verdict is jansson 2.14's `json_loadb` with `JSON_DECODE_ANY |
/// JSON_ALLOW_NUL` (and `JSON_DECODE_INT_AS_REAL` when `integersAsReals`),
/// behind `JSON.parse`'s refusal of any raw NUL byte:
/// - UTF-8 as the standard has it: no overlong forms, no surrogates, nothing
///   above U+10FFFF, anywhere in the text;
/// - RFC 8259 grammar, whitespace being space, tab, LF and CR only;
/// - at most `JSON_PARSER_MAX_DEPTH` nested values, scalars counted: 2048
///   nested arrays are fine, a number inside the innermost is not;
/// - `\u` escapes: a high surrogate must be followed by a low one, a lone
///   low one is refused; `\u0000` is fine in a string value, not in a key;
/// - numbers that overflow a double are refused ("real number overflow");
///   without `integersAsReals`, so are integers outside Int64;
/// - duplicate keys are allowed (jansson keeps the last).
/// `fuzz/harnesses/json_validator.swift` holds it to jansson's verdict.
package enum JSONValidator {
    /// What is wrong; the messages follow jansson's where it has one.
    package enum Problem: Sendable, Equatable {
        case rawNUL
        case invalidUTF8(UInt8)
        case prematureEnd
        case controlCharacter(UInt8)
        case invalidEscape
        case loneSurrogate(UInt32)
        case badSurrogatePair(UInt32, UInt32)
        case nulInKey
        case invalidToken
        case keyExpected
        case colonExpected
        case closingBraceExpected
        case closingBracketExpected
        case endExpected
        case tooDeep
        case realOverflow
        case integerOverflow(negative: Bool)
        /// More nested objects and arrays than the caller allows (`maxNesting`).
        case nestedTooDeep(limit: Int)

        package var description: String {
            switch self {
            case .rawNUL: return "a raw NUL byte"
            case .invalidUTF8(let byte): return "unable to decode byte 0x\(String(byte, radix: 16)) as UTF-8"
            case .prematureEnd: return "premature end of input"
            case .controlCharacter(0x0A): return "unexpected newline in a string"
            case .controlCharacter(let byte): return "control character 0x\(String(byte, radix: 16)) in a string"
            case .invalidEscape: return "invalid escape"
            case .loneSurrogate(let unit): return "invalid Unicode '\\u\(hex4(unit))'"
            case .badSurrogatePair(let high, let low): return "invalid Unicode '\\u\(hex4(high))\\u\(hex4(low))'"
            case .nulInKey: return "NUL byte in object key not supported"
            case .invalidToken: return "invalid token"
            case .keyExpected: return "string or '}' expected"
            case .colonExpected: return "':' expected"
            case .closingBraceExpected: return "'}' expected"
            case .closingBracketExpected: return "']' expected"
            case .endExpected: return "end of file expected"
            case .tooDeep: return "maximum parsing depth reached"
            case .realOverflow: return "real number overflow"
            case .integerOverflow(let negative): return negative ? "too big negative integer" : "too big integer"
            case .nestedTooDeep(let limit): return "objects and arrays nested more than \(limit) deep"
            }
        }

        private func hex4(_ unit: UInt32) -> String {
            let digits = String(unit, radix: 16, uppercase: true)
            return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        }
    }

    /// The problem and the byte offset where it starts.
    package struct Failure: Error, Sendable, Equatable {
        package let problem: Problem
        package let position: Int
    }

    package enum TopLevel: Sendable, Equatable { case object, array, scalar }

    /// Validates `bytes` as one JSON value; returns what kind it is.
    /// `maxNesting`: the most objects and arrays open at once (the top
    /// one counts), on top of jansson's limit of nested values.
    package static func validate(_ bytes: UnsafeBufferPointer<UInt8>,
                                integersAsReals: Bool, maxNesting: Int = .max) throws(Failure) -> TopLevel {
        // The common shape first: a yes there is one the scanner would give.
        if maxNesting >= 1 && JSONFlatObject.matches(bytes) { return .object }
        var scanner = JSONScanner(bytes: bytes, integersAsReals: integersAsReals)
        scanner.maxNesting = maxNesting
        return try scanner.document()
    }

    /// `validate`, with its failure as `.invalidJSON` saying what is wrong
    /// and where, as `JSON.parse` words it.
    package static func validate(_ bytes: UnsafeBufferPointer<UInt8>, what: String,
                                integersAsReals: Bool, maxNesting: Int = .max) throws(AppNorthError) -> TopLevel {
        do {
            return try validate(bytes, integersAsReals: integersAsReals, maxNesting: maxNesting)
        } catch {
            let (line, column) = lineAndColumn(of: error.position, in: bytes)
            throw .invalidJSON("\(what) is not valid JSON: \(error.problem.description) (line \(line), column \(column), byte \(error.position))",
                               position: error.position)
        }
    }

    /// The line and column (in characters, from 1) of a byte offset, for
    /// messages: computed only once something is wrong.
    package static func lineAndColumn(of position: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes.prefix(max(0, position)) {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }

    // MARK: Helpers

    static func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }

    /// Printable ASCII other than quote and backslash: taken as is in a string.
    @inline(__always)
    static func isPlain(_ b: UInt8) -> Bool {
        b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\")
    }

    /// `isPlain` for eight bytes at once (the first in the lowest bits): the
    /// high bit of each byte that is not plain is set. Bits above the first
    /// such byte may be set falsely (a borrow runs upward), so only the
    /// lowest set bit counts, and it is exact.
    ///
    /// Two subtractions cover the four kinds: `b ^ 0x02` is below 0x21
    /// exactly for a control byte or the quote (0x22 ^ 0x02 = 0x20), and
    /// `b ^ 0x5C` is 0 for the backslash; minus 0x21 and minus 1 those wrap
    /// to a high bit. A byte from 0x80 up keeps its high bit through the
    /// second, but for 0xDC (0x80 minus 1), which the first sets (0xDE minus
    /// 0x21). Any other byte sets neither. A byte borrows from the next
    /// only when it is one of these, so below the first one no bit is set.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quoteOrBelow = (word ^ (ones &* 0x02)) &- ones &* 0x21
        let backslashOrHigh = (word ^ (ones &* 0x5C)) &- ones
        return (quoteOrBelow | backslashOrHigh) & (ones &* 0x80)
    }

    static func hexValue(_ b: UInt8) -> UInt32? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(b - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    /// The length of the well-formed UTF-8 sequence of two to four bytes
    /// at `i`, or 0: no overlong forms (C0, C1, E0 80-9F, F0 80-8F), no
    /// surrogates (ED A0-BF), nothing above U+10FFFF (F4 90-BF, F5-FF).
    static func characterLength(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Int {
        let first = bytes[i]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch first {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return 0
        }
        guard bytes.count - i >= length, (low...high).contains(bytes[i + 1]) else { return 0 }
        for k in 2..<length where bytes[i + k] & 0xC0 != 0x80 { return 0 }
        return length
    }

    /// Whether all of `bytes` is well-formed UTF-8 (`characterLength`'s rules).
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        while i < bytes.count {
            if bytes[i] < 0x80 {
                i += 1
                continue
            }
            let length = characterLength(bytes, at: i)
            guard length > 0 else { return false }
            i += length
        }
        return true
    }

    /// Whether `i` starts a well-formed character (so the text around it is
    /// at fault, not its encoding).
    static func isCharacter(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
        bytes[i] < 0x80 || characterLength(bytes, at: i) > 0
    }
}
