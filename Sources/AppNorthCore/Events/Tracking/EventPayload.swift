/// Builds an event's upload JSON by splicing: the host's properties text is
/// validated elsewhere and inserted as-is, never re-serialised, so numbers
/// keep their exact spelling; only the short strings are escaped.
///
/// An event reads `{"id","name","timestamp",` then the identity tail
/// (`"anonymous_id","user_id","session_id","properties":`), which changes
/// only with identify/reset and a new session: it is built then, not per
/// event. One writer (`write`) lays the bytes out, into raw memory sized
/// beforehand (`maximumSize`): the hot path writes into a journal stripe's
/// buffer, the builders below into arrays.
enum EventPayload {
    static func build(id: String, name: String, timestampMs: Int64, propertiesJSON: String?,
                      anonymousID: String, userID: String?, sessionID: String) -> [UInt8] {
        let tail = identityTail(anonymousID: anonymousID, userID: userID, sessionID: sessionID)
        var id = id
        return id.withUTF8 { build(id: UnsafeRawBufferPointer($0), name: name, timestampMs: timestampMs,
                                   propertiesJSON: propertiesJSON, tail: tail) }
    }

    /// A fresh UUIDv7 for the id, the tail as built (tests and tools; the
    /// hot path writes into a stripe's buffer: `AppNorthEvents.track`).
    static func build(name: String, timestampMs: Int64, propertiesJSON: String?, tail: [UInt8]) -> [UInt8] {
        var stamp = EventStamp()
        stamp.update(timestampMs)
        var random: (UInt64, UInt16) = (0, 0)
        withUnsafeMutableBytes(of: &random) { Random.fill($0) }
        var id: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &id) { stamp.writeID(random: random, to: $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        return withUnsafeBytes(of: id) { raw in
            build(id: UnsafeRawBufferPointer(rebasing: raw[0..<EventStamp.idLength]), name: name, timestampMs: timestampMs,
                  propertiesJSON: propertiesJSON, tail: tail)
        }
    }

    private static func build(id: UnsafeRawBufferPointer, name: String, timestampMs: Int64, propertiesJSON: String?,
                              tail: [UInt8]) -> [UInt8] {
        var stamp = EventStamp()
        stamp.update(timestampMs)
        var name = name
        var properties = propertiesJSON ?? "{}"
        return name.withUTF8 { name in
            properties.withUTF8 { properties in
                tail.withUnsafeBytes { tail in
                    let size = maximumSize(id: id.count, name: name.count, tail: tail.count, properties: properties.count)
                    return [UInt8](unsafeUninitializedCapacity: size) { out, count in
                        count = write(to: out.baseAddress!, id: id, name: name, stamp: stamp, tail: tail, properties: properties)
                    }
                }
            }
        }
    }

    /// The most bytes `write` needs: every name byte escaped as `\u00XX`,
    /// the longest timestamp (and the 4 bytes past it that
    /// `EventStamp.writeDigits` stores too), `{}` for no properties.
    @inline(__always)
    static func maximumSize(id: Int, name: Int, tail: Int, properties: Int) -> Int {
        id + 6 * name + tail + properties + 64
    }

    /// Writes an event at `out`, which has room for `maximumSize` bytes;
    /// returns its size. `properties` nil: `{}`.
    @inline(__always)
    static func write(to out: UnsafeMutablePointer<UInt8>, id: UnsafeRawBufferPointer, name: UnsafeBufferPointer<UInt8>,
                      stamp: EventStamp, tail: UnsafeRawBufferPointer, properties: UnsafeBufferPointer<UInt8>?) -> Int {
        var o = put(#"{"id":""#, at: out)
        o += put(id, at: out + o)
        o += put(#"","name":"#, at: out + o)
        o += writeString(name, to: out + o)
        o += put(#","timestamp":"#, at: out + o)
        o += stamp.writeDigits(to: out + o)
        o += put(tail, at: out + o)
        if let properties {
            o += put(UnsafeRawBufferPointer(properties), at: out + o)
        } else {
            o += put("{}", at: out + o)
        }
        out[o] = UInt8(ascii: "}")
        return o + 1
    }

    @inline(__always)
    private static func put(_ text: StaticString, at out: UnsafeMutablePointer<UInt8>) -> Int {
        out.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
        return text.utf8CodeUnitCount
    }

    @inline(__always)
    private static func put(_ bytes: UnsafeRawBufferPointer, at out: UnsafeMutablePointer<UInt8>) -> Int {
        if let base = bytes.baseAddress { UnsafeMutableRawPointer(out).copyMemory(from: base, byteCount: bytes.count) }
        return bytes.count
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

    /// Decimal digits of an integer.
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 24
        withUnsafeMutableBytes(of: &digits) { raw in
            let count = writeInteger(value, to: raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[0..<count]))
        }
    }

    /// Writes an integer's decimal digits (at most 20 bytes); returns how many.
    static func writeInteger(_ value: Int64, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let sign = value < 0 ? 1 : 0
        if sign == 1 { out[0] = UInt8(ascii: "-") }
        var magnitude = value.magnitude
        var count = 1
        var rest = magnitude / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        var k = sign + count
        repeat {
            k -= 1
            out[k] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        return sign + count
    }

    /// A JSON string literal (RFC 8259 escapes).
    static func appendString(_ value: String, to out: inout [UInt8]) {
        var value = value
        value.withUTF8 { bytes in
            let start = out.count
            out.append(contentsOf: repeatElement(0, count: 6 * bytes.count + 2))
            let written = out.withUnsafeMutableBufferPointer { writeString(bytes, to: $0.baseAddress! + start) }
            out.removeLast(out.count - start - written)
        }
    }

    /// Writes a JSON string literal of `bytes` (room for 6 per byte and the
    /// quotes); returns its size. Eight bytes at a time: each word is stored
    /// as it is judged (no second pass, no memmove call), and an escaped
    /// byte is written over what it stored; the last 1-7 bytes go as the
    /// string's last eight when those need no escape.
    @inline(__always)
    static func writeString(_ bytes: UnsafeBufferPointer<UInt8>, to out: UnsafeMutablePointer<UInt8>) -> Int {
        out[0] = UInt8(ascii: "\"")
        var o = 1
        if let base = bytes.baseAddress {
            let count = bytes.count
            let from = UnsafeRawPointer(base)
            var i = 0
            // Every byte from here to `i` was written as it is (none escaped).
            var verbatim = 0
            var lastWordTried = false
            while i < count {
                if count &- i >= 8 {
                    let word = from.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    // Room: at most 6 per byte so far, and 8 or more bytes left.
                    UnsafeMutableRawPointer(out + o).storeBytes(of: word, as: UInt64.self)
                    let escaped = escapedBytes(UInt64(littleEndian: word))
                    if escaped == 0 {
                        i &+= 8
                        o &+= 8
                        continue
                    }
                    let plain = escaped.trailingZeroBitCount >> 3
                    i &+= plain
                    o &+= plain
                } else if !lastWordTried && count >= 8 && count &- 8 >= verbatim {
                    lastWordTried = true
                    let word = from.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
                    if escapedBytes(UInt64(littleEndian: word)) == 0 {
                        // Its first bytes are already out, as they are.
                        UnsafeMutableRawPointer(out + o - (i &- (count &- 8))).storeBytes(of: word, as: UInt64.self)
                        o &+= count &- i
                        break
                    }
                }
                let byte = base[i]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                    o &+= writeEscape(byte, to: out + o)
                    verbatim = i &+ 1
                } else {
                    out[o] = byte
                    o &+= 1
                }
                i &+= 1
            }
        }
        out[o] = UInt8(ascii: "\"")
        return o + 1
    }

    /// The bytes of `word` a JSON string escapes (`"`, `\`, below 0x20),
    /// each as its high bit. Bytes above 0x7F are not (UTF-8 goes as it
    /// is). As in `JSONValidator.specialBytes`, only the lowest set bit is
    /// exact (a borrow runs upward): enough to find the first.
    @inline(__always)
    static func escapedBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let below = (word &- ones &* 0x20) & ~word
        let quote = (quotes &- ones) & ~quotes
        let backslash = (backslashes &- ones) & ~backslashes
        return (below | quote | backslash) & 0x8080_8080_8080_8080
    }

    private static func writeEscape(_ byte: UInt8, to out: UnsafeMutablePointer<UInt8>) -> Int {
        out[0] = UInt8(ascii: "\\")
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out[1] = byte
        case 0x0A: out[1] = UInt8(ascii: "n")
        case 0x0D: out[1] = UInt8(ascii: "r")
        case 0x09: out[1] = UInt8(ascii: "t")
        default:
            let hex: StaticString = "0123456789abcdef"
            _ = put(#"u00"#, at: out + 1)
            out[4] = hex.utf8Start[Int(byte >> 4)]
            out[5] = hex.utf8Start[Int(byte & 0xF)]
            return 6
        }
        return 2
    }
}
