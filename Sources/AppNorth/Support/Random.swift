import CSystem
import Glibc

/// Randomness from the kernel (getrandom), for ids and jitter.
enum Random {
    static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { buffer in
            var filled = 0
            while filled < count {
                let n = getrandom(buffer.baseAddress! + filled, count - filled, 0)
                if n > 0 { filled += n } else if errno != EINTR { fatalError("getrandom failed: \(errno)") }
            }
        }
        return out
    }

    /// A random hex token, for idempotency keys and session ids.
    static func hexToken(bytes count: Int = 16) -> String {
        bytes(count).map { Text.hexByte($0) }.joined().lowercased()
    }

    /// A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits,
    /// so ids sort by creation time.
    static func uuidV7(unixMilliseconds: Int64) -> String {
        var b = bytes(16)
        let ms = UInt64(max(0, unixMilliseconds))
        for i in 0..<6 { b[i] = UInt8(truncatingIfNeeded: ms >> (40 - 8 * UInt64(i))) }
        b[6] = 0x70 | (b[6] & 0x0F)
        b[8] = 0x80 | (b[8] & 0x3F)
        let hex = b.map { Text.hexByte($0) }.joined().lowercased()
        let chars = Array(hex)
        return String(chars[0..<8]) + "-" + String(chars[8..<12]) + "-" + String(chars[12..<16]) + "-"
            + String(chars[16..<20]) + "-" + String(chars[20..<32])
    }

    /// A uniform double in [0, 1), for backoff jitter.
    static func unit() -> Double {
        let raw = bytes(8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        return Double(raw >> 11) / Double(1 << 53)
    }
}
