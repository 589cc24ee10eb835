import CJansson

/// The scanner behind `JSONValidator.validate`: the grammar, strings and
/// numbers in one pass over the bytes. Its own type (it was nested in
/// `JSONValidator`, which it took past the size gate); its problems and
/// failures are the validator's.
struct JSONScanner {
    typealias Problem = JSONValidator.Problem
    typealias Failure = JSONValidator.Failure
    typealias TopLevel = JSONValidator.TopLevel

    /// Nesting is kept as one bit per open container (1: object), in a fixed
    /// block on the stack: the depth limit bounds it.
    private static let maxDepth = Int(JSON_PARSER_MAX_DEPTH)
    private typealias Nesting = (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                                 UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)

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

    /// Whitespace, if any: one compare when the next byte is a token's
    /// (text without whitespace is the common case).
    @inline(__always)
    mutating func skipSpace() {
        guard i < bytes.count, bytes[i] <= 0x20 else { return }
        skipSpaceRun()
    }

    private mutating func skipSpaceRun() {
        while i < bytes.count {
            let b = bytes[i]
            guard b <= 0x20, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            i += 1
        }
    }

    mutating func document() throws(Failure) -> TopLevel {
        guard MemoryLayout<Nesting>.size * 8 >= Self.maxDepth else {
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
        var inObject = false  // the innermost container is an object
        func innermostIsObject() -> Bool {
            nesting[(open - 1) >> 6] & (1 << UInt64((open - 1) & 63)) != 0
        }
        while true {
            switch state {
            case .value:
                skipSpace()
                guard i < bytes.count else { throw fail(.prematureEnd, at: i) }
                guard open < Self.maxDepth else { throw fail(.tooDeep, at: i) }
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
                    inObject = isObject
                    state = isObject ? .key : .value
                    continue
                }
                try scalar(b)
                state = .afterValue
            case .key:
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw unexpected(.keyExpected) }
                try string(isKey: true)
                if i >= bytes.count || bytes[i] != UInt8(ascii: ":") {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw unexpected(.colonExpected) }
                }
                i += 1
                state = .value
            case .afterValue:
                skipSpace()
                if open == 0 {
                    guard i == bytes.count else { throw unexpected(.endExpected) }
                    return top
                }
                let isObject = inObject
                guard i < bytes.count else { throw fail(.prematureEnd, at: i) }
                let b = bytes[i]
                if b == UInt8(ascii: ",") {
                    i += 1
                    state = isObject ? .key : .value
                } else if b == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    i += 1
                    open -= 1
                    if open > 0 { inObject = innermostIsObject() }
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
        // The position in a local while scanning (no store and reload of
        // `i` per step), written back before anything that reads `i`.
        var k = i + 1
        let count = bytes.count
        let base = UnsafeRawPointer(bytes.baseAddress!)  // not empty: `i` was at a quote
        while true {
            // Skip plain bytes (printable ASCII other than quote and
            // backslash) eight at a time, to the first other one.
            if count - k >= 8 {
                let special = JSONValidator.specialBytes(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: k, as: UInt64.self)))
                if special == 0 {
                    k += 8
                    continue
                }
                k += special.trailingZeroBitCount >> 3
            } else {
                while k < count, JSONValidator.isPlain(bytes[k]) { k += 1 }
                guard k < count else { throw fail(.prematureEnd, at: k) }
            }
            let b = bytes[k]
            if b == UInt8(ascii: "\"") {
                i = k + 1
                return
            } else if b == UInt8(ascii: "\\") {
                i = k
                try escape(isKey: isKey)
                k = i
            } else if b >= 0x80 {
                let length = JSONValidator.characterLength(bytes, at: k)
                guard length > 0 else { throw fail(.invalidUTF8(b), at: k) }
                k += length
            } else {
                throw fail(b == 0 ? .rawNUL : .controlCharacter(b), at: k)
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
        // The position in a local (see `string`), written back at the end.
        var k = i
        defer { i = k }
        let start = k
        let negative = bytes[k] == UInt8(ascii: "-")
        if negative { k += 1 }
        let integerStart = k
        guard k < bytes.count, JSONValidator.isDigit(bytes[k]) else { throw invalidNumber(at: start, k) }
        if bytes[k] == UInt8(ascii: "0") {
            k += 1
            if k < bytes.count, JSONValidator.isDigit(bytes[k]) { throw fail(.invalidToken, at: start) }
        } else {
            while k < bytes.count, JSONValidator.isDigit(bytes[k]) { k += 1 }
        }
        let integerEnd = k
        var fractionEnd = k
        var exponent = 0
        var isReal = false
        if k < bytes.count, bytes[k] == UInt8(ascii: ".") {
            isReal = true
            k += 1
            guard k < bytes.count, JSONValidator.isDigit(bytes[k]) else { throw invalidNumber(at: start, k) }
            while k < bytes.count, JSONValidator.isDigit(bytes[k]) { k += 1 }
            fractionEnd = k
        }
        if k < bytes.count, bytes[k] == UInt8(ascii: "e") || bytes[k] == UInt8(ascii: "E") {
            isReal = true
            k += 1
            var exponentNegative = false
            if k < bytes.count, bytes[k] == UInt8(ascii: "+") || bytes[k] == UInt8(ascii: "-") {
                exponentNegative = bytes[k] == UInt8(ascii: "-")
                k += 1
            }
            guard k < bytes.count, JSONValidator.isDigit(bytes[k]) else { throw invalidNumber(at: start, k) }
            while k < bytes.count, JSONValidator.isDigit(bytes[k]) {
                // Saturates far beyond any exponent that could matter.
                exponent = min(exponent * 10 + Int(bytes[k] - UInt8(ascii: "0")), 1 << 40)
                k += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        // Fewer than 309 integer digits and no positive exponent stay
        // below 10^308, as do fewer than 19 digits below 2^63: only
        // longer numbers need the digits compared.
        if exponent <= 0 && integerEnd - integerStart < 19 { return }
        if isReal || integersAsReals {
            if exponent <= 0 && integerEnd - integerStart <= 308 { return }
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
    private func invalidNumber(at start: Int, _ i: Int) -> Failure {
        guard i < bytes.count else { return fail(.prematureEnd, at: i) }
        return fail(bytes[i] == 0 ? .rawNUL : .invalidToken, at: start)
    }
}
