/// Builds an event's upload JSON by splicing: the host's properties text is
/// validated elsewhere and inserted as-is, never re-serialised, so numbers
/// keep their exact spelling; only the short strings are escaped.
///
/// An event reads `{"id","name","timestamp",` then the identity tail
/// (`"anonymous_id","user_id","session_id","properties":`), which changes
/// only with identify/reset and a new session: it is built then, not per
/// event.
enum EventPayload {
    static func build(id: String, name: String, timestampMs: Int64, propertiesJSON: String?,
                      anonymousID: String, userID: String?, sessionID: String) -> [UInt8] {
        let tail = identityTail(anonymousID: anonymousID, userID: userID, sessionID: sessionID)
        return build(name: name, timestampMs: timestampMs, propertiesJSON: propertiesJSON, tail: tail) {
            $0.append(contentsOf: id.utf8)
        }
    }

    /// A fresh UUIDv7 for the id, the tail as built (tests and tools; the
    /// hot path builds into a stripe's buffer, below).
    static func build(name: String, timestampMs: Int64, propertiesJSON: String?, tail: [UInt8]) -> [UInt8] {
        build(name: name, timestampMs: timestampMs, propertiesJSON: propertiesJSON, tail: tail) {
            Random.appendUUIDv7(unixMilliseconds: timestampMs, to: &$0)
        }
    }

    /// The hot path's form: into `out` (a journal stripe's reused buffer),
    /// a fresh UUIDv7 from `pool` for the id, the tail as built.
    static func build(into out: inout [UInt8], name: String, timestampMs: Int64, propertiesJSON: String?,
                      tail: [UInt8], pool: inout RandomPool) {
        out.removeAll(keepingCapacity: true)
        build(into: &out, name: name, timestampMs: timestampMs, propertiesJSON: propertiesJSON, tail: tail) {
            Random.appendUUIDv7(unixMilliseconds: timestampMs, to: &$0, pool: &pool)
        }
    }

    private static func build(name: String, timestampMs: Int64, propertiesJSON: String?, tail: [UInt8],
                              id: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        build(into: &out, name: name, timestampMs: timestampMs, propertiesJSON: propertiesJSON, tail: tail, id: id)
        return out
    }

    private static func build(into out: inout [UInt8], name: String, timestampMs: Int64, propertiesJSON: String?,
                              tail: [UInt8], id: (inout [UInt8]) -> Void) {
        out.reserveCapacity(80 + name.utf8.count + tail.count + (propertiesJSON?.utf8.count ?? 2))
        out.append(contentsOf: #"{"id":""#.utf8)
        id(&out)
        out.append(contentsOf: #"","name":"#.utf8)
        appendString(name, to: &out)
        out.append(contentsOf: #","timestamp":"#.utf8)
        appendInteger(timestampMs, to: &out)
        out.append(contentsOf: tail)
        out.append(contentsOf: (propertiesJSON ?? "{}").utf8)
        out.append(UInt8(ascii: "}"))
    }

    /// `,"anonymous_id":…,"user_id":…,"session_id":…,"properties":`
    static func identityTail(anonymousID: String, userID: String?, sessionID: String) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #","anonymous_id":"#.utf8)
        appendString(anonymousID, to: &out)
        out.append(contentsOf: #","user_id":"#.utf8)
        if let userID { appendString(userID, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","session_id":"#.utf8)
        appendString(sessionID, to: &out)
        out.append(contentsOf: #","properties":"#.utf8)
        return out
    }

    /// Decimal digits of an integer, without a temporary String.
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 20 digits
        let count = withUnsafeMutableBytes(of: &digits) { buffer -> Int in
            var n = 0
            repeat {
                buffer[n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                n += 1
            } while magnitude > 0
            return n
        }
        withUnsafeBytes(of: &digits) { buffer in
            for i in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[i]) }
        }
    }

    /// A JSON string literal (RFC 8259 escapes).
    static func appendString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            // Copy runs that need no escaping in one go.
            var runStart = 0
            for (i, byte) in bytes.enumerated() where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                runStart = i + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                default:
                    let hex: StaticString = "0123456789abcdef"
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex.utf8Start[Int(byte >> 4)])
                    out.append(hex.utf8Start[Int(byte & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}
