/// Builds an event's upload JSON by splicing: the host's properties text is
/// validated elsewhere and inserted as-is, never re-serialised, so numbers
/// keep their exact spelling; only the short strings are escaped.
enum EventPayload {
    static func build(id: String, name: String, timestampMs: Int64, propertiesJSON: String?,
                      anonymousID: String, userID: String?, sessionID: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + name.utf8.count + (propertiesJSON?.utf8.count ?? 2))
        out += Array(#"{"id":""#.utf8); out += Array(id.utf8)
        out += Array(#"","name":"#.utf8); appendString(name, to: &out)
        out += Array(#","timestamp":"#.utf8); out += Array(String(timestampMs).utf8)
        out += Array(#","anonymous_id":"#.utf8); appendString(anonymousID, to: &out)
        out += Array(#","user_id":"#.utf8)
        if let userID { appendString(userID, to: &out) } else { out += Array("null".utf8) }
        out += Array(#","session_id":"#.utf8); appendString(sessionID, to: &out)
        out += Array(#","properties":"#.utf8)
        out += Array((propertiesJSON ?? "{}").utf8)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A JSON string literal (RFC 8259 escapes).
    static func appendString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20:
                out += Array("\\u00".utf8)
                let hex = Array("0123456789abcdef".utf8)
                out += [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
