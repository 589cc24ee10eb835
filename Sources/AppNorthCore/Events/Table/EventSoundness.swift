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
        var walker = JSONMemberWalker(bytes)
        var id: Range<Int>?, name: Range<Int>?, timestamp: Range<Int>?
        while let member = walker.next() {
            guard !member.keyEscaped else { return nil }  // only a decoder can compare it
            switch String(decoding: UnsafeBufferPointer(rebasing: bytes[member.key]), as: UTF8.self) {
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
}
