import CJansson

/// Whether a stored payload is a sound event: a JSON object with a string
/// `id` and `name` and a numeric `timestamp` within `StoredWallTime.range`,
/// judged as jansson judges it (integers past 64 bits read as reals, the
/// last of duplicate keys wins).
///
/// The upload checks every row it reads, so that a damaged file cannot make
/// the server refuse the good events of a batch. Building a jansson tree
/// per event cost about 0.8 ms per batch of 100, a third of the upload
/// thread's work; this checks the text with `JSONValidator` (no tree, no
/// allocation) and then walks the top level's members in place. Anything
/// it cannot judge that way exactly (an escaped key, a timestamp that is
/// not a short integer) goes to jansson, the reference.
enum EventSoundness {
    static func isSound(_ payload: [UInt8]) -> Bool {
        payload.withUnsafeBufferPointer { bytes in
            guard (try? JSONValidator.validate(bytes, integersAsReals: true)) == .object else { return false }
            return quickVerdict(bytes) ?? reference(payload)
        }
    }

    /// jansson's verdict: parse, then look the three members up.
    static func reference(_ payload: [UInt8]) -> Bool {
        let parsed = payload.withUnsafeBytes { try? JSON.parse($0, what: "stored event", flags: size_t(JSON_DECODE_INT_AS_REAL)) }
        guard let root = parsed, root.kind == .object, root["id"]?.stringValue != nil,
              root["name"]?.stringValue != nil, let timestamp = root["timestamp"]?.doubleValue else { return false }
        return Double(StoredWallTime.range.lowerBound) <= timestamp && timestamp <= Double(StoredWallTime.range.upperBound)
    }

    /// The verdict from the top-level members of text `JSONValidator` has
    /// found to be one valid object; nil when only jansson can tell.
    static func quickVerdict(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool? {
        var walker = MemberWalker(bytes: bytes)
        var id: Range<Int>?, name: Range<Int>?, timestamp: Range<Int>?
        while let member = walker.next() {
            guard let key = member.key else { return nil }  // escaped: only a decoder can compare it
            switch key {
            case "id": id = member.value
            case "name": name = member.value
            case "timestamp": timestamp = member.value
            default: break
            }
        }
        guard let id, let name, let timestamp else { return false }
        let quote = UInt8(ascii: "\"")
        guard bytes[id.lowerBound] == quote, bytes[name.lowerBound] == quote else { return false }
        let first = bytes[timestamp.lowerBound]
        guard first == UInt8(ascii: "-") || JSONValidator.isDigit(first) else { return false }  // not a number
        // Up to 15 digits, an integer is exact as a double: compare it as one.
        let digits = bytes[(first == UInt8(ascii: "-") ? timestamp.lowerBound + 1 : timestamp.lowerBound)..<timestamp.upperBound]
        guard digits.count <= 15, digits.allSatisfy(JSONValidator.isDigit) else { return nil }
        let value = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
        return StoredWallTime.range.contains(first == UInt8(ascii: "-") ? -value : value)
    }

    /// The members of a valid JSON object, in order: each key's raw text
    /// (nil when it holds an escape) and its value's byte range. Only for
    /// text that `JSONValidator` has accepted as an object.
    struct MemberWalker {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0
        var started = false

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func next() -> (key: String?, value: Range<Int>)? {
            if !started {
                started = true
                skipSpace()
                i += 1  // "{"
            }
            skipSpace()
            guard i < bytes.count, bytes[i] != UInt8(ascii: "}") else { return nil }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                skipSpace()
            }
            let keyStart = i + 1
            let escaped = skipString()
            let key = escaped ? nil : String(decoding: UnsafeBufferPointer(rebasing: bytes[keyStart..<(i - 1)]), as: UTF8.self)
            skipSpace()
            i += 1  // ":"
            skipSpace()
            let valueStart = i
            skipValue()
            return (key, valueStart..<i)
        }

        private mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
        }

        /// Past the string starting at `i`; true when it held an escape.
        private mutating func skipString() -> Bool {
            var escaped = false
            i += 1
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\\") {
                    escaped = true
                    i += 2
                    continue
                }
                i += 1
                if b == UInt8(ascii: "\"") { break }
            }
            return escaped
        }

        /// Past the value starting at `i` (containers whole).
        private mutating func skipValue() {
            var depth = 0
            while i < bytes.count {
                let b = bytes[i]
                switch b {
                case UInt8(ascii: "\""):
                    _ = skipString()
                    if depth == 0 { return }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return }
                    depth -= 1
                    if depth == 0 {
                        i += 1
                        return
                    }
                case UInt8(ascii: ","), 0x20, 0x0A, 0x0D, 0x09:
                    if depth == 0 { return }
                default:
                    break
                }
                i += 1
            }
        }
    }
}
