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
public enum JSONValidator {
    /// What is wrong; the messages follow jansson's where it has one.
    public enum Problem: Sendable, Equatable {
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

        public var description: String {
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
    public struct Failure: Error, Sendable, Equatable {
        public let problem: Problem
        public let position: Int
    }

    public enum TopLevel: Sendable, Equatable { case object, array, scalar }

    /// Validates `bytes` as one JSON value; returns what kind it is.
    /// `maxNesting`: the most objects and arrays open at once (the top
    /// one counts), on top of jansson's limit of nested values.
    public static func validate(_ bytes: UnsafeBufferPointer<UInt8>,
                                integersAsReals: Bool, maxNesting: Int = .max) throws(Failure) -> TopLevel {
        var scanner = Scanner(bytes: bytes, integersAsReals: integersAsReals)
        scanner.maxNesting = maxNesting
        return try scanner.document()
    }

    /// `validate`, with its failure as `.invalidJSON` saying what is wrong
    /// and where, as `JSON.parse` words it.
    public static func validate(_ bytes: UnsafeBufferPointer<UInt8>, what: String,
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
    public static func lineAndColumn(of position: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (line: Int, column: Int) {
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

    /// Nesting is kept as one bit per open container (1: object), in a fixed
    /// block on the stack: the depth limit bounds it.
    private static let maxDepth = Int(JSON_PARSER_MAX_DEPTH)
    private typealias Nesting = (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        let integersAsReals: Bool
        var maxNesting = Int.max
        var i = 0

        init(bytes: UnsafeBufferPointer<UInt8>, integersAsReals: Bool) {
            self.bytes = bytes
            self.integersAsReals = integersAsReals
        }

        func fail(_ problem: Problem, at position: Int) -> Failure {
            Failure(problem: problem, position: position)
        }

        /// What a byte that cannot start the expected token means.
        func unexpected(_ fallback: Problem) -> Failure {
            guard i < bytes.count else { return fail(.prematureEnd, at: i) }
            return fail(bytes[i] == 0 ? .rawNUL : fallback, at: i)
        }

        @inline(__always)
        mutating func skipSpace() {
            while i < bytes.count {
                let b = bytes[i]
                guard b <= 0x20, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
                i += 1
            }
        }

        mutating func document() throws(Failure) -> TopLevel {
            guard MemoryLayout<Nesting>.size * 8 >= JSONValidator.maxDepth else {
                // Only if jansson's configured limit ever grows past the block.
                throw fail(.tooDeep, at: 0)
            }
            var nesting: Nesting = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            return try withUnsafeMutableBytes(of: &nesting) { raw throws(Failure) -> TopLevel in
                try values(raw.bindMemory(to: UInt64.self))
            }
        }

        /// The whole grammar as a loop over three states, so that nesting
        /// costs a bit, not a stack frame.
        private mutating func values(_ nesting: UnsafeMutableBufferPointer<UInt64>) throws(Failure) -> TopLevel {
            enum State { case value, key, afterValue }
            var state = State.value
            var open = 0  // containers open
            var top = TopLevel.scalar
            func innermostIsObject() -> Bool {
                nesting[(open - 1) >> 6] & (1 << UInt64((open - 1) & 63)) != 0
            }
            while true {
                switch state {
                case .value:
                    skipSpace()
                    guard i < bytes.count else { throw fail(.prematureEnd, at: i) }
                    guard open < JSONValidator.maxDepth else { throw fail(.tooDeep, at: i) }
                    let b = bytes[i]
                    if b == UInt8(ascii: "{") || b == UInt8(ascii: "[") {
                        let isObject = b == UInt8(ascii: "{")
                        guard open < maxNesting else { throw fail(.nestedTooDeep(limit: maxNesting), at: i) }
                        if open == 0 { top = isObject ? .object : .array }
                        i += 1
                        skipSpace()
                        if i < bytes.count, bytes[i] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                            i += 1
                            state = .afterValue
                            continue
                        }
                        let word = open >> 6
                        let bit: UInt64 = 1 << UInt64(open & 63)
                        nesting[word] = isObject ? nesting[word] | bit : nesting[word] & ~bit
                        open += 1
                        state = isObject ? .key : .value
                        continue
                    }
                    try scalar(b)
                    state = .afterValue
                case .key:
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw unexpected(.keyExpected) }
                    try string(isKey: true)
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw unexpected(.colonExpected) }
                    i += 1
                    state = .value
                case .afterValue:
                    skipSpace()
                    if open == 0 {
                        guard i == bytes.count else { throw unexpected(.endExpected) }
                        return top
                    }
                    let isObject = innermostIsObject()
                    guard i < bytes.count else { throw fail(.prematureEnd, at: i) }
                    let b = bytes[i]
                    if b == UInt8(ascii: ",") {
                        i += 1
                        state = isObject ? .key : .value
                    } else if b == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        i += 1
                        open -= 1
                    } else {
                        throw unexpected(isObject ? .closingBraceExpected : .closingBracketExpected)
                    }
                }
            }
        }

        /// A string, number or literal starting with `b` at `i`.
        @inline(__always)
        private mutating func scalar(_ b: UInt8) throws(Failure) {
            switch b {
            case UInt8(ascii: "\""):
                try string(isKey: false)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try number()
            case UInt8(ascii: "t"):
                try literal("true")
            case UInt8(ascii: "f"):
                try literal("false")
            case UInt8(ascii: "n"):
                try literal("null")
            default:
                throw unexpected(b >= 0x80 && !JSONValidator.isCharacter(bytes, at: i) ? .invalidUTF8(b) : .invalidToken)
            }
        }

        /// `true`, `false` or `null`, compared four bytes at once.
        @inline(__always)
        private mutating func literal(_ word: StaticString) throws(Failure) {
            let count = word.utf8CodeUnitCount
            guard bytes.count - i >= count,
                  load32(at: i) == UnsafeRawPointer(word.utf8Start).loadUnaligned(as: UInt32.self),
                  count == 4 || bytes[i + 4] == word.utf8Start[4] else { throw fail(.invalidToken, at: i) }
            i += count
        }

        @inline(__always)
        private func load32(at position: Int) -> UInt32 {
            UnsafeRawPointer(bytes.baseAddress!).loadUnaligned(fromByteOffset: position, as: UInt32.self)
        }

        // MARK: Strings

        /// A string from its opening quote at `i` to past its closing one.
        @inline(__always)
        private mutating func string(isKey: Bool) throws(Failure) {
            i += 1
            let base = UnsafeRawPointer(bytes.baseAddress!)  // not empty: `i` was at a quote
            while true {
                // Skip plain bytes (printable ASCII other than quote and
                // backslash) eight at a time, to the first other one.
                if bytes.count - i >= 8 {
                    let special = JSONValidator.specialBytes(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                    if special == 0 {
                        i += 8
                        continue
                    }
                    i += special.trailingZeroBitCount >> 3
                } else {
                    while i < bytes.count, JSONValidator.isPlain(bytes[i]) { i += 1 }
                    guard i < bytes.count else { throw fail(.prematureEnd, at: i) }
                }
                let b = bytes[i]
                if b == UInt8(ascii: "\"") {
                    i += 1
                    return
                } else if b == UInt8(ascii: "\\") {
                    try escape(isKey: isKey)
                } else if b >= 0x80 {
                    let length = JSONValidator.characterLength(bytes, at: i)
                    guard length > 0 else { throw fail(.invalidUTF8(b), at: i) }
                    i += length
                } else {
                    throw fail(b == 0 ? .rawNUL : .controlCharacter(b), at: i)
                }
            }
        }

        /// An escape from its backslash at `i`.
        private mutating func escape(isKey: Bool) throws(Failure) {
            let start = i
            guard i + 1 < bytes.count else { throw fail(.prematureEnd, at: bytes.count) }
            switch bytes[i + 1] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                 UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                i += 2
                return
            case UInt8(ascii: "u"):
                break
            default:
                throw fail(.invalidEscape, at: start)
            }
            let unit = try hex4(at: i + 2, escape: start)
            i += 6
            switch unit {
            case 0 where isKey:
                throw fail(.nulInKey, at: start)
            case 0xD800...0xDBFF:
                guard bytes.count - i >= 2, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw fail(.loneSurrogate(unit), at: start)
                }
                let low = try hex4(at: i + 2, escape: i)
                guard (0xDC00...0xDFFF).contains(low) else { throw fail(.badSurrogatePair(unit, low), at: start) }
                i += 6
            case 0xDC00...0xDFFF:
                throw fail(.loneSurrogate(unit), at: start)
            default:
                break
            }
        }

        /// Four hex digits at `at`, of the `\u` escape that starts at `escape`.
        private func hex4(at position: Int, escape: Int) throws(Failure) -> UInt32 {
            guard bytes.count - position >= 4 else {
                // jansson reads on to the end first: a bad digit there is an invalid escape.
                for k in position..<bytes.count where JSONValidator.hexValue(bytes[k]) == nil {
                    throw fail(bytes[k] == 0 ? .rawNUL : .invalidEscape, at: escape)
                }
                throw fail(.prematureEnd, at: bytes.count)
            }
            var value: UInt32 = 0
            for k in position..<(position + 4) {
                guard let digit = JSONValidator.hexValue(bytes[k]) else {
                    throw fail(bytes[k] == 0 ? .rawNUL : .invalidEscape, at: escape)
                }
                value = value << 4 | digit
            }
            return value
        }

        // MARK: Numbers

        /// A number at `i`: the RFC 8259 form, then its range.
        @inline(__always)
        private mutating func number() throws(Failure) {
            let start = i
            let negative = bytes[i] == UInt8(ascii: "-")
            if negative { i += 1 }
            let integerStart = i
            guard i < bytes.count, JSONValidator.isDigit(bytes[i]) else { throw invalidNumber(at: start) }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
                if i < bytes.count, JSONValidator.isDigit(bytes[i]) { throw fail(.invalidToken, at: start) }
            } else {
                while i < bytes.count, JSONValidator.isDigit(bytes[i]) { i += 1 }
            }
            let integerEnd = i
            var fractionEnd = i
            var exponent = 0
            var isReal = false
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                isReal = true
                i += 1
                guard i < bytes.count, JSONValidator.isDigit(bytes[i]) else { throw invalidNumber(at: start) }
                while i < bytes.count, JSONValidator.isDigit(bytes[i]) { i += 1 }
                fractionEnd = i
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                isReal = true
                i += 1
                var exponentNegative = false
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") {
                    exponentNegative = bytes[i] == UInt8(ascii: "-")
                    i += 1
                }
                guard i < bytes.count, JSONValidator.isDigit(bytes[i]) else { throw invalidNumber(at: start) }
                while i < bytes.count, JSONValidator.isDigit(bytes[i]) {
                    // Saturates far beyond any exponent that could matter.
                    exponent = min(exponent * 10 + Int(bytes[i] - UInt8(ascii: "0")), 1 << 40)
                    i += 1
                }
                if exponentNegative { exponent = -exponent }
            }
            if isReal || integersAsReals {
                if JSONValidator.overflowsDouble(bytes, integer: integerStart..<integerEnd,
                                                 fractionEnd: fractionEnd, exponent: exponent) {
                    throw fail(.realOverflow, at: start)
                }
            } else if JSONValidator.overflowsInt64(bytes[integerStart..<integerEnd], negative: negative) {
                throw fail(.integerOverflow(negative: negative), at: start)
            }
        }

        /// A number cut short (`-`, `1.`, `1e+`): a raw NUL or the end, or
        /// else an invalid token.
        private func invalidNumber(at start: Int) -> Failure {
            guard i < bytes.count else { return fail(.prematureEnd, at: i) }
            return fail(bytes[i] == 0 ? .rawNUL : .invalidToken, at: start)
        }
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
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let below = (word &- ones &* 0x20) & ~word
        let quote = (quotes &- ones) & ~quotes
        let backslash = (backslashes &- ones) & ~backslashes
        return (below | quote | backslash | word) & highs
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

    /// Whether `i` starts a well-formed character (so the text around it is
    /// at fault, not its encoding).
    static func isCharacter(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
        bytes[i] < 0x80 || characterLength(bytes, at: i) > 0
    }

    /// Whether an integer part (no leading zeros) with decimal digits running
    /// on to `fractionEnd` (past a '.') times 10^`exponent` rounds past
    /// DBL_MAX, as strtod (round to nearest) reports with ERANGE. The
    /// threshold is DBL_MAX plus half its last step, 2^1024 - 2^970, where a
    /// tie rounds to the even neighbour 2^1024: infinity.
    static func overflowsDouble(_ bytes: UnsafeBufferPointer<UInt8>, integer: Range<Int>,
                                fractionEnd: Int, exponent: Int) -> Bool {
        // The decimal exponent of the first significant digit.
        var first = integer.lowerBound
        var magnitude: Int
        if bytes[first] != UInt8(ascii: "0") {
            magnitude = integer.count - 1
        } else {
            // "0.000ddd": skip the point and the zeros after it.
            first = integer.upperBound + 1
            while first < fractionEnd, bytes[first] == UInt8(ascii: "0") { first += 1 }
            guard first < fractionEnd else { return false }  // zero
            magnitude = integer.upperBound - first
        }
        magnitude = magnitude.addingSaturating(exponent)
        if magnitude < 308 { return false }
        if magnitude > 308 { return true }
        // 10^308 <= |value| < 10^309: compare the digits with the threshold's.
        var k = 0
        var position = first
        let threshold = overflowThresholdDigits
        while position < fractionEnd {
            let digit = bytes[position]
            position += 1
            if digit == UInt8(ascii: ".") { continue }
            // All of the threshold's digits matched: the rest can only add.
            guard k < threshold.utf8CodeUnitCount else { return true }
            let limit = threshold.utf8Start[k]
            k += 1
            if digit != limit { return digit > limit }
        }
        return k == threshold.utf8CodeUnitCount  // equal digits: the tie
    }

    /// 2^1024 - 2^970 in decimal, without trailing zeros.
    private static let overflowThresholdDigits: StaticString =
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792"

    /// Whether decimal digits (no leading zeros) are outside Int64, as
    /// strtoll reports with ERANGE.
    static func overflowsInt64(_ digits: Slice<UnsafeBufferPointer<UInt8>>, negative: Bool) -> Bool {
        let limit: StaticString = negative ? "9223372036854775808" : "9223372036854775807"
        if digits.count != limit.utf8CodeUnitCount { return digits.count > limit.utf8CodeUnitCount }
        for (k, digit) in digits.enumerated() where digit != limit.utf8Start[k] { return digit > limit.utf8Start[k] }
        return false
    }
}
