import CSystem
import Glibc

/// Randomness from the kernel (getrandom), for ids and jitter.
///
/// Bytes come from a 4 KiB pool refilled by one getrandom call, so an id on
/// the tracking hot path costs no system call. The pool is discarded in a
/// forked child, which must never repeat its parent's ids.
enum Random {
    // process-wide, not a ForkLocal: checks ForkGuard.generation itself on every draw (a
    // ForkLocal's slot lock would be a second global lock on track()'s path).
    private static let pool = Lock(RandomPool(size: 4096), level: LockClass.randomPool)

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
    // process-wide, not a ForkLocal: a generator seeded anew from the clocks and the pid on each use.
    private static let fallbackState = Lock<UInt64>(0, level: LockClass.randomFallback)
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
    /// so ids sort by creation time (written as events write theirs:
    /// `EventStamp.writeID`).
    static func uuidV7(unixMilliseconds: Int64) -> String {
        var stamp = EventStamp()
        stamp.update(unixMilliseconds)
        var random: (UInt64, UInt16) = (0, 0)
        withUnsafeMutableBytes(of: &random) { fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<10])) }
        return String(unsafeUninitializedCapacity: EventStamp.idLength) { out in
            stamp.writeID(random: random, to: out.baseAddress!)
            return EventStamp.idLength
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

    /// 80 random bits (an event id's 74): from the pool's bytes while it
    /// holds enough for this process, else through `fill`.
    @inline(__always)
    mutating func next80() -> (UInt64, UInt16) {
        if generation == ForkGuard.generation && bytes.count - used >= 10 {
            let at = used
            used += 10
            return bytes.withUnsafeBytes { ($0.loadUnaligned(fromByteOffset: at, as: UInt64.self),
                                            $0.loadUnaligned(fromByteOffset: at + 8, as: UInt16.self)) }
        }
        var random: (UInt64, UInt16) = (0, 0)
        withUnsafeMutableBytes(of: &random) { fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<10])) }
        return random
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

extension LockClass {
    /// `Random.pool`: the random pool (taken inside `EventSender.current`: a
    /// session's rotation makes the new session id under the sender's lock).
    static let randomPool = LockClass.leaf("Random.pool", takenInside: ["EventSender.current"])
    /// `Random.fallbackState`: the generator used when getrandom and
    /// /dev/urandom fail (taken inside `Random.pool`, whose refill falls back to it).
    static let randomFallback = LockClass.leaf("Random.fallbackState", takenInside: ["Random.pool"])
}
