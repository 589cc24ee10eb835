import CSystem
import Glibc

/// Randomness from the kernel (getrandom), for ids and jitter.
///
/// Bytes come from a 4 KiB pool refilled by one getrandom call, so an id on
/// the tracking hot path costs no system call. The pool is discarded in a
/// forked child, which must never repeat its parent's ids.
enum Random {
    private static let pool = Lock(RandomPool(size: 4096))

    /// Fills `buffer` with random bytes.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        pool.withLock { $0.fill(buffer) }
    }

    /// getrandom, then /dev/urandom; if both fail (a kernel without
    /// getrandom in a sandbox without /dev) a clock-seeded generator, which
    /// keeps ids unique if not secret. Never a trap: this runs in the host.
    static func kernelRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        var filled = 0
        while filled < buffer.count {
            let n = getrandom(base + filled, buffer.count - filled, 0)
            if n > 0 { filled += n } else if errno != EINTR { break }
        }
        if filled < buffer.count { filled += deviceRandom(base + filled, buffer.count - filled) }
        if filled < buffer.count { fallbackRandom(UnsafeMutableRawBufferPointer(start: base + filled, count: buffer.count - filled)) }
    }

    private static func deviceRandom(_ start: UnsafeMutableRawPointer, _ count: Int) -> Int {
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var filled = 0
        while filled < count {
            let n = read(fd, start + filled, count - filled)
            if n > 0 { filled += n } else if n < 0 && errno == EINTR { continue } else { break }
        }
        return filled
    }

    /// splitmix64 over the clocks, the pid and a counter.
    private static let fallbackState = Lock<UInt64>(0)
    private static func fallbackRandom(_ buffer: UnsafeMutableRawBufferPointer) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let seed = UInt64(truncatingIfNeeded: ts.tv_nsec) ^ UInt64(truncatingIfNeeded: ts.tv_sec) << 20
            ^ UInt64(truncatingIfNeeded: getpid()) << 40 ^ SystemClock().monotonicNanoseconds()
        fallbackState.withLock { (state: inout UInt64) in
            state ^= seed
            for i in 0..<buffer.count {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                buffer[i] = UInt8(truncatingIfNeeded: z ^ (z >> 31))
            }
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Lowercase hex of `count` random bytes, for idempotency keys and
    /// session ids.
    static func hexToken(bytes count: Int = 16) -> String {
        var raw = [UInt8](repeating: 0, count: count)
        raw.withUnsafeMutableBytes { fill($0) }
        return String(unsafeUninitializedCapacity: count * 2) { out in
            for (i, byte) in raw.enumerated() {
                out[2 * i] = hexDigits.utf8Start[Int(byte >> 4)]
                out[2 * i + 1] = hexDigits.utf8Start[Int(byte & 0xF)]
            }
            return count * 2
        }
    }

    /// A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits,
    /// so ids sort by creation time. Formatted without intermediate
    /// strings: it is on the tracking hot path.
    static func uuidV7(unixMilliseconds: Int64) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            writeUUIDv7(unixMilliseconds: unixMilliseconds, into: out)
            return 36
        }
    }

    /// Appends a UUIDv7's 36 characters, without making a String (the
    /// tracking hot path writes it straight into the event's JSON). The
    /// random bits come from `pool` (a journal stripe's own, so threads
    /// that track at once share no lock), or the process's pool.
    static func appendUUIDv7(unixMilliseconds: Int64, to bytes: inout [UInt8], pool: inout RandomPool) {
        var random: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &random) { pool.fill($0) }
        appendUUIDv7(unixMilliseconds: unixMilliseconds, random: random, to: &bytes)
    }

    static func appendUUIDv7(unixMilliseconds: Int64, to bytes: inout [UInt8]) {
        var random: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &random) { fill($0) }
        appendUUIDv7(unixMilliseconds: unixMilliseconds, random: random, to: &bytes)
    }

    private static func appendUUIDv7(unixMilliseconds: Int64, random: (UInt64, UInt64), to bytes: inout [UInt8]) {
        var text: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)  // 40 bytes of room
        withUnsafeMutableBytes(of: &text) { raw in
            let out = raw.bindMemory(to: UInt8.self)
            writeUUIDv7(unixMilliseconds: unixMilliseconds, random: random, into: out)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: out[0..<36]))
        }
    }

    /// Writes a new UUIDv7 into the first 36 bytes of `out`.
    private static func writeUUIDv7(unixMilliseconds: Int64, into out: UnsafeMutableBufferPointer<UInt8>) {
        var random: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &random) { fill($0) }
        writeUUIDv7(unixMilliseconds: unixMilliseconds, random: random, into: out)
    }

    private static func writeUUIDv7(unixMilliseconds: Int64, random: (UInt64, UInt64),
                                    into out: UnsafeMutableBufferPointer<UInt8>) {
        guard out.count >= 36 else { return }
        var b = random
        withUnsafeMutableBytes(of: &b) { raw in
            let ms = UInt64(max(0, unixMilliseconds))
            for i in 0..<6 { raw[i] = UInt8(truncatingIfNeeded: ms >> (40 - 8 * UInt64(i))) }
            raw[6] = 0x70 | (raw[6] & 0x0F)
            raw[8] = 0x80 | (raw[8] & 0x3F)
            var o = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[o] = UInt8(ascii: "-")
                    o += 1
                }
                out[o] = hexDigits.utf8Start[Int(raw[i] >> 4)]
                out[o + 1] = hexDigits.utf8Start[Int(raw[i] & 0xF)]
                o += 2
            }
        }
    }

    /// A uniform double in [0, 1), for backoff jitter.
    static func unit() -> Double {
        var raw: UInt64 = 0
        withUnsafeMutableBytes(of: &raw) { fill($0) }
        return Double(raw >> 11) / Double(1 << 53)
    }
}

/// Random bytes from the kernel, fetched in blocks: an id costs no system
/// call. Not locked: the process's pool sits behind `Random`'s lock, and
/// each journal stripe keeps one under its own. Discarded in a forked
/// child, which must never repeat its parent's bytes.
struct RandomPool {
    private var bytes: [UInt8]
    private var used: Int
    /// The fork generation the bytes were drawn in (ForkGuard: every
    /// fork() moves it in the child, and reading it costs no system call).
    private var generation: UInt64 = 0

    init(size: Int) {
        bytes = [UInt8](repeating: 0, count: max(16, size))
        used = bytes.count
    }

    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        let current = ForkGuard.generation
        if generation != current {
            generation = current
            used = bytes.count
        }
        var offset = 0
        while offset < buffer.count {
            if used == bytes.count {
                bytes.withUnsafeMutableBytes { Random.kernelRandom($0) }
                used = 0
            }
            let n = min(buffer.count - offset, bytes.count - used)
            bytes.withUnsafeBytes { source in
                guard let to = buffer.baseAddress, let from = source.baseAddress else { return }
                (to + offset).copyMemory(from: from + used, byteCount: n)
            }
            used += n
            offset += n
        }
    }
}
