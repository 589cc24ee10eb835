/// The byte format of one event in a journal file (see `EventJournal`).
///
/// A record is a 16-byte header and the event's upload JSON:
///
///     magic | payload length (UInt32, LE) | checksum (UInt64, LE) | payload
///
/// The magic is the record's version and says which checksum it carries:
/// "ANJ2" (`checksum2`, what `track` writes) or "ANJ1" (`checksum`, what
/// earlier versions wrote; still read, so the journals they left import
/// as before). The checksum covers the length and
/// the payload, so a torn record (the process died inside its `write`) or
/// any other damage fails it. Records are written whole by one `writev` on
/// an `O_APPEND` descriptor, so they never interleave; damage can still sit
/// between good records (a short write on a full disk), so the decoder
/// resynchronises on the next magic instead of giving up on the rest of the
/// file.
enum JournalRecord {
    static let headerSize = 16
    /// "ANJ1" read as a little-endian UInt32: records checked by `checksum`.
    static let magic1: UInt32 = 0x314A_4E41
    /// "ANJ2": records checked by `checksum2`, which `track` writes.
    static let magic2: UInt32 = 0x324A_4E41
    /// The largest payload a record may claim: the largest event `track`
    /// accepts (`AppNorthEventsOptions.maxEventBytes` tops at 16 MiB).
    static let maxPayload = 16 << 20

    /// The header for `payload`, as two words to write before it (`version1`:
    /// an "ANJ1" record, as earlier versions wrote; for tests and tools).
    static func header(for payload: UnsafeRawBufferPointer, version1: Bool = false) -> (UInt64, UInt64) {
        let length = UInt32(truncatingIfNeeded: payload.count)
        return ((UInt64(version1 ? magic1 : magic2) | UInt64(length) << 32).littleEndian,
                (version1 ? checksum(length: length, payload) : checksum2(length: length, payload)).littleEndian)
    }

    /// The checksum a record with this magic carries; nil for any other magic.
    @inline(__always)
    static func checksum(magic: UInt32, length: UInt32, _ payload: UnsafeRawBufferPointer) -> UInt64? {
        switch magic {
        case magic2: return checksum2(length: length, payload)
        case magic1: return checksum(length: length, payload)
        default: return nil
        }
    }

    static func isMagic(_ word: UInt32) -> Bool { word == magic2 || word == magic1 }

    /// The "ANJ1" checksum: a 64-bit mixing checksum over the length and the
    /// payload, eight bytes per step (five instructions a word).
    static func checksum(length: UInt32, _ payload: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0x27D4_EB2F_1656_67C5 ^ (UInt64(length) &* k1)
        if let base = payload.baseAddress {
            let count = payload.count
            @inline(__always) func word(_ at: Int) -> UInt64 {
                UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            }
            var offset = 0
            // Four words a turn: the same steps, a quarter of the loop's own.
            while count &- offset >= 32 {
                h = mix(mix(mix(mix(h, word(offset)), word(offset &+ 8)), word(offset &+ 16)), word(offset &+ 24))
                offset &+= 32
            }
            while count &- offset >= 8 {
                h = mix(h, word(offset))
                offset &+= 8
            }
            // The last 1 to 7 bytes as the low bytes of a word (the rest
            // zero): the top of the payload's last eight when it has eight.
            let rest = count &- offset
            var tail: UInt64 = 0
            if rest > 0 && count >= 8 {
                tail = word(count &- 8) >> UInt64(64 &- 8 &* rest)
            } else {
                for k in 0..<rest { tail |= UInt64(base.load(fromByteOffset: offset &+ k, as: UInt8.self)) << UInt64(8 &* k) }
            }
            h = mix(h, tail)
        }
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 29
        return h
    }

    /// The "ANJ2" checksum: sixteen bytes per step, folded into the state
    /// by one 64 x 64 -> 128-bit multiply whose halves are xored (wyhash's
    /// `mum`), chained: `h = mum(w0 ^ s1, w1 ^ h)`. About half the
    /// instructions of `checksum` a byte. A last 1 to 15 bytes go as the
    /// payload's last sixteen (overlapping what went before: the decoder
    /// does the same). `w0 ^ s1` is never 0 for a payload the library
    /// writes (UTF-8 text never holds the byte 0xFF that `s1` starts with),
    /// so no step forgets what went before it.
    static func checksum2(length: UInt32, _ payload: UnsafeRawBufferPointer) -> UInt64 {
        var h = s0 ^ UInt64(length)
        let count = payload.count
        if let base = payload.baseAddress, count > 0 {
            @inline(__always) func word(_ at: Int) -> UInt64 {
                UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            }
            var offset = 0
            while count &- offset >= 32 {
                h = mum(word(offset) ^ s1, word(offset &+ 8) ^ h)
                h = mum(word(offset &+ 16) ^ s1, word(offset &+ 24) ^ h)
                offset &+= 32
            }
            if count &- offset >= 16 {
                h = mum(word(offset) ^ s1, word(offset &+ 8) ^ h)
                offset &+= 16
            }
            if offset < count {
                var a: UInt64 = 0, b: UInt64 = 0
                if count >= 16 {
                    a = word(count &- 16)
                    b = word(count &- 8)
                } else if count >= 8 {
                    a = word(0)
                    b = word(count &- 8)
                } else {
                    for k in 0..<count { a |= UInt64(base.load(fromByteOffset: k, as: UInt8.self)) << UInt64(8 &* k) }
                }
                h = mum(a ^ s2, b ^ h)
            }
        }
        return mum(h ^ s3, UInt64(count) ^ s4)
    }

    @inline(__always)
    private static func mum(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (high, low) = a.multipliedFullWidth(by: b)
        return high ^ low
    }

    private static var s0: UInt64 { 0xA076_1D64_78BD_642F }
    private static var s1: UInt64 { 0xFF03_7ED1_A0B4_28DB }
    private static var s2: UInt64 { 0x8EBC_6AF0_9C88_C6E3 }
    private static var s3: UInt64 { 0x5899_65CC_7537_4CC3 }
    private static var s4: UInt64 { 0x1D8E_4E27_C47D_124F }

    private static var k1: UInt64 { 0x9E37_79B9_7F4A_7C15 }
    private static var k2: UInt64 { 0xC2B2_AE3D_27D4_EB4F }

    @inline(__always)
    private static func mix(_ h: UInt64, _ word: UInt64) -> UInt64 {
        let x = h ^ (word &* k1)
        return (x << 31 | x >> 33) &* k2
    }

    /// One event read back: its id (taken from the payload, which starts
    /// `{"id":"<36 characters>"` as `EventPayload` writes it) and payload.
    struct Event: Equatable {
        let id: String
        let payload: [UInt8]

        /// The Unix milliseconds a UUIDv7 id starts with (its first 12 hex
        /// digits), which order events of several journal files; 0 for an
        /// id that is not hex there.
        var milliseconds: Int64 {
            var value: Int64 = 0
            for (index, byte) in id.utf8.prefix(13).enumerated() where index != 8 {
                guard let digit = JournalRecord.hexValue(byte) else { return 0 }
                value = value << 4 | Int64(digit)
            }
            return value
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// What a journal file held.
    struct Decoded {
        var events: [Event] = []
        /// Damaged stretches skipped: a bad magic, length or checksum, a
        /// payload without an event id, or a torn tail.
        var damaged = 0
    }

    /// Decodes a whole journal file. Never traps, whatever the bytes.
    static func decode(_ bytes: [UInt8]) -> Decoded {
        var out = Decoded()
        var position = 0
        while let found = next(in: bytes, from: position) {
            out.damaged += found.damaged
            guard let event = found.event else { break }
            out.events.append(event)
            position = found.end
        }
        return out
    }

    /// The first sound record at or after `position`, with its offset, the
    /// offset after it and the damaged stretches skipped before it; at the end of
    /// the bytes `event` is nil (and `damaged` counts a damaged tail). Nil
    /// when nothing is left at all. Lets an import decode a file a part at
    /// a time, from where the last part ended. Never traps.
    static func next(in bytes: [UInt8], from position: Int) -> (event: Event?, start: Int, end: Int, damaged: Int)? {
        guard case .record(let event, let start, let end, let damaged) = scan(bytes, from: position, complete: true, inDamage: false)
        else { return nil }
        return (event, start, end, damaged)
    }

    /// What a look for the next record in some of a file's bytes found.
    enum Scan: Equatable {
        /// Nothing left at all.
        case none
        /// A sound record (or, `event` nil, the end of the bytes), as `next`.
        case record(Event?, start: Int, end: Int, damaged: Int)
        /// The bytes end before the record that may start at `at` does
        /// (or before a header): read `need` bytes from `at` and look again,
        /// carrying `damaged` and whether a damaged stretch is still open.
        case more(at: Int, need: Int, damaged: Int, inDamage: Bool)
    }

    /// `next` over a window of a file: `complete` says the bytes run to the
    /// file's end; when they do not, a record the window cuts is asked for
    /// (`more`) instead of being taken for damage. Never traps.
    static func scan(_ bytes: [UInt8], from position: Int, complete: Bool, inDamage: Bool) -> Scan {
        bytes.withUnsafeBytes { buffer in
            let count = buffer.count
            var position = max(0, position)
            guard position < count else { return complete ? .none : .more(at: position, need: headerSize, damaged: 0, inDamage: inDamage) }
            var damaged = 0
            var inDamage = inDamage
            while position < count {
                if !complete, let need = cut(at: position, in: buffer) {
                    return .more(at: position, need: need, damaged: damaged, inDamage: inDamage)
                }
                if let (event, next) = record(at: position, in: buffer) {
                    return .record(event, start: position, end: next, damaged: damaged)
                }
                // Count each damaged stretch once, then look for the next
                // record start.
                if !inDamage { damaged += 1 }
                inDamage = true
                position += 1
            }
            return complete ? .record(nil, start: count, end: count, damaged: damaged)
                            : .more(at: count, need: headerSize, damaged: damaged, inDamage: inDamage)
        }
    }

    /// The bytes a record starting at `position` needs when the buffer
    /// ends before it could: a header cut short, or a plausible header
    /// (magic, a length within bounds) whose payload runs past the end.
    private static func cut(at position: Int, in buffer: UnsafeRawBufferPointer) -> Int? {
        guard let base = buffer.baseAddress else { return nil }
        let left = buffer.count - position
        guard left >= headerSize else { return headerSize }
        let first = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        guard isMagic(UInt32(truncatingIfNeeded: first)) else { return nil }
        let length = Int(UInt32(truncatingIfNeeded: first >> 32))
        guard length <= maxPayload, headerSize + length > left else { return nil }
        return headerSize + length
    }

    /// The record starting at `position`, and where the next one starts;
    /// nil when there is no sound record there.
    private static func record(at position: Int, in buffer: UnsafeRawBufferPointer) -> (Event, Int)? {
        guard let base = buffer.baseAddress, position >= 0, buffer.count - position >= headerSize else { return nil }
        let first = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        let magic = UInt32(truncatingIfNeeded: first)
        guard isMagic(magic) else { return nil }
        let length = Int(UInt32(truncatingIfNeeded: first >> 32))
        guard length <= maxPayload, length <= buffer.count - position - headerSize else { return nil }
        let stored = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position + 8, as: UInt64.self))
        let payload = UnsafeRawBufferPointer(start: base + position + headerSize, count: length)
        guard checksum(magic: magic, length: UInt32(length), payload) == stored, let id = eventID(payload) else { return nil }
        return (Event(id: id, payload: Array(payload)), position + headerSize + length)
    }

    static let idPrefix: [UInt8] = Array(#"{"id":""#.utf8)

    /// The UUID at the front of a payload: 36 hex digits and dashes.
    static func eventID(_ payload: UnsafeRawBufferPointer) -> String? {
        let idEnd = idPrefix.count + 36
        guard payload.count > idEnd, payload[idEnd] == UInt8(ascii: "\""),
              payload.prefix(idPrefix.count).elementsEqual(idPrefix) else { return nil }
        let id = payload[idPrefix.count..<idEnd]
        guard id.allSatisfy({ $0 == UInt8(ascii: "-") || isHexDigit($0) }) else { return nil }
        return String(decoding: id, as: UTF8.self)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }

    /// A record's bytes, for tests and tools (the hot path writes the
    /// header and payload with one `writev` instead).
    static func encode(_ payload: [UInt8], version1: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerSize + payload.count)
        payload.withUnsafeBytes { p in
            let (a, b) = header(for: p, version1: version1)
            withUnsafeBytes(of: a) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: b) { out.append(contentsOf: $0) }
        }
        out.append(contentsOf: payload)
        return out
    }
}
