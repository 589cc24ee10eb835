import Glibc

/// A journal stripe's event under construction: raw memory reused from one
/// event to the next, so that writing an event costs no allocation, no
/// uniqueness check and no bounds-checked append. Non-copyable: one owner,
/// which frees it.
struct EventBuffer: ~Copyable {
    private(set) var base: UnsafeMutablePointer<UInt8>?
    private(set) var capacity = 0
    /// The size of the event it holds.
    var count = 0

    init() {}

    deinit { free(base) }

    /// Memory for at least `needed` bytes, its contents dropped; nil when
    /// the system has none (the caller refuses the event: no trap).
    mutating func room(for needed: Int) -> UnsafeMutablePointer<UInt8>? {
        count = 0
        if needed <= capacity, let base { return base }
        release()
        let size = max(needed, 512)
        guard let fresh = malloc(size) else { return nil }
        base = fresh.bindMemory(to: UInt8.self, capacity: size)
        capacity = size
        return base
    }

    /// The event it holds.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: base == nil ? 0 : count) }

    /// A huge event's memory is not kept for the small ones after it.
    mutating func trim() {
        if capacity > 64 << 10 { release() }
    }

    mutating func release() {
        free(base)
        base = nil
        capacity = 0
        count = 0
    }

    /// Holds a copy of `bytes` (tests and tools).
    mutating func set(_ bytes: [UInt8]) throws(AppNorthError) {
        guard let to = room(for: bytes.count) else { throw .internal("out of memory") }
        bytes.withUnsafeBufferPointer { if let from = $0.baseAddress { to.update(from: from, count: $0.count) } }
        count = bytes.count
    }
}

/// What every event of one millisecond shares, written once for all of
/// them: the timestamp's digits and the time half of the UUIDv7 id
/// (`xxxxxxxx-xxxx-`, 48 bits of Unix milliseconds, RFC 9562).
struct EventStamp {
    private(set) var milliseconds: Int64 = -1
    /// The decimal digits (at most 20) and how many.
    private var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
    private(set) var digitCount = 0
    /// The id's first 14 characters.
    private var idHead: (UInt64, UInt64) = (0, 0)

    static let idLength = 36

    /// Rendered from the start (as -1 ms): a first event at -1 ms (a host
    /// clock) would otherwise find "its" millisecond rendered, with no
    /// digits (`"timestamp":,`, not JSON).
    init() { render(-1) }

    /// Renders `ms` unless it is the millisecond already rendered.
    @inline(__always)
    mutating func update(_ ms: Int64) {
        if ms != milliseconds { render(ms) }
    }

    private mutating func render(_ ms: Int64) {
        milliseconds = ms
        digitCount = withUnsafeMutableBytes(of: &digits) { EventPayload.writeInteger(ms, to: $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        let time = UInt64(max(0, ms)) & 0xFFFF_FFFF_FFFF
        withUnsafeMutableBytes(of: &idHead) { raw in
            let out = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var o = 0
            for shift in stride(from: 40, through: 0, by: -8) {
                if o == 8 {
                    out[o] = UInt8(ascii: "-")
                    o += 1
                }
                Self.writeHex(UInt8(truncatingIfNeeded: time >> UInt64(shift)), to: out + o)
                o += 2
            }
            out[13] = UInt8(ascii: "-")
        }
    }

    /// Writes the timestamp's digits at `out`; returns how many. All 24
    /// bytes of their room go, as three words (no memcpy call): the caller
    /// has room for them and writes over the ones past the digits.
    @inline(__always)
    func writeDigits(to out: UnsafeMutablePointer<UInt8>) -> Int {
        withUnsafeBytes(of: digits) { UnsafeMutableRawPointer(out).copyMemory(from: $0.baseAddress!, byteCount: 24) }
        return digitCount
    }

    /// Writes a UUIDv7 of this millisecond at `out` (36 bytes): the time
    /// half rendered, version 7 and variant 10, then `random`'s 74 bits.
    @inline(__always)
    func writeID(random: (UInt64, UInt16), to out: UnsafeMutablePointer<UInt8>) {
        withUnsafeBytes(of: idHead) { out.update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 14) }
        let r = random.0
        Self.writeHex(0x70 | UInt8(truncatingIfNeeded: r) & 0x0F, to: out + 14)
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 8), to: out + 16)
        out[18] = UInt8(ascii: "-")
        Self.writeHex(0x80 | UInt8(truncatingIfNeeded: r >> 16) & 0x3F, to: out + 19)
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 24), to: out + 21)
        out[23] = UInt8(ascii: "-")
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 32), to: out + 24)
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 40), to: out + 26)
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 48), to: out + 28)
        Self.writeHex(UInt8(truncatingIfNeeded: r >> 56), to: out + 30)
        Self.writeHex(UInt8(truncatingIfNeeded: random.1), to: out + 32)
        Self.writeHex(UInt8(truncatingIfNeeded: random.1 >> 8), to: out + 34)
    }

    /// Two lowercase hex digits of every byte value, in order.
    private static var hexPairs: StaticString { "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff" }

    @inline(__always)
    static func writeHex(_ byte: UInt8, to out: UnsafeMutablePointer<UInt8>) {
        let pair = UnsafeRawPointer(hexPairs.utf8Start).loadUnaligned(fromByteOffset: Int(byte) << 1, as: UInt16.self)
        UnsafeMutableRawPointer(out).storeBytes(of: pair, as: UInt16.self)
    }
}
