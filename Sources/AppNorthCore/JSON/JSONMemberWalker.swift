/// Walks the members of one JSON object in its text, in order, without
/// building a tree: each key's range inside its quotes (and whether it
/// holds an escape) and the exact range of its value. The one walker under
/// `JSONText.objectMembers` (config documents keep their served spelling)
/// and `EventSoundness` (the upload's check of stored events).
///
/// Meant for text a validator or parser has accepted; on malformed text it
/// stops (`next()` returns nil, `malformed` is set) and never traps. A key
/// that appears twice is walked twice.
struct JSONMemberWalker {
    struct Member {
        /// The key's bytes between its quotes, still escaped.
        let key: Range<Int>
        /// Whether the key holds a backslash escape (only a decoder can
        /// compare it then: `JSONText.unescaped`).
        let keyEscaped: Bool
        /// The value's text, without surrounding whitespace.
        let value: Range<Int>
    }

    let bytes: UnsafeBufferPointer<UInt8>
    private var i: Int
    private let end: Int
    private var opened = false
    /// Set when the walk stopped at text that is not a whole object.
    private(set) var malformed = false
    private var finished = false

    /// Walks the object that `bytes[range]` (all of `bytes` by default)
    /// holds, whitespace around it allowed.
    init(_ bytes: UnsafeBufferPointer<UInt8>, in range: Range<Int>? = nil) {
        self.bytes = bytes
        i = range?.lowerBound ?? 0
        end = min(range?.upperBound ?? bytes.count, bytes.count)
    }

    /// The next member; nil after the last one or at malformed text.
    mutating func next() -> Member? {
        guard !finished, !malformed else { return nil }
        skipSpace()
        if !opened {
            guard take(UInt8(ascii: "{")) else { return stop() }
            opened = true
            skipSpace()
            if take(UInt8(ascii: "}")) { return done() }
        } else {
            if take(UInt8(ascii: "}")) { return done() }
            guard take(UInt8(ascii: ",")) else { return stop() }
            skipSpace()
        }
        guard i < end, bytes[i] == UInt8(ascii: "\"") else { return stop() }
        let keyStart = i + 1
        guard let escaped = skipString() else { return stop() }
        let key = keyStart..<(i - 1)
        skipSpace()
        guard take(UInt8(ascii: ":")) else { return stop() }
        skipSpace()
        let valueStart = i
        guard skipValue() else { return stop() }
        return Member(key: key, keyEscaped: escaped, value: valueStart..<i)
    }

    private mutating func stop() -> Member? {
        malformed = true
        return nil
    }

    private mutating func done() -> Member? {
        finished = true
        return nil
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard i < end, bytes[i] == byte else { return false }
        i += 1
        return true
    }

    private mutating func skipSpace() {
        while i < end, JSONText.isSpace(bytes[i]) { i += 1 }
    }

    /// Past the string whose opening quote is at `i`: whether it held an
    /// escape, nil when it does not end.
    private mutating func skipString() -> Bool? {
        var escaped = false
        i += 1
        while i < end {
            let b = bytes[i]
            i += 1
            if b == UInt8(ascii: "\\") {
                escaped = true
                i += 1
                continue
            }
            if b == UInt8(ascii: "\"") { return escaped }
        }
        return nil
    }

    /// Past one value of any kind (containers whole); false when it does
    /// not end or is empty.
    private mutating func skipValue() -> Bool {
        guard i < end else { return false }
        switch bytes[i] {
        case UInt8(ascii: "\""):
            return skipString() != nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while i < end {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    guard skipString() != nil else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        i += 1
                        return true
                    }
                default:
                    break
                }
                i += 1
            }
            return false
        default:
            // A number, true, false or null: up to the next delimiter.
            let start = i
            while i < end {
                let b = bytes[i]
                if JSONText.isSpace(b) || b == UInt8(ascii: ",") || b == UInt8(ascii: "}") || b == UInt8(ascii: "]") { break }
                i += 1
            }
            return i > start
        }
    }
}
