// Shared by every harness: reads structured values from libFuzzer's bytes,
// and stops the process loudly when an invariant breaks.
import Glibc

/// Consumes a fuzz input from the front: small numbers for choices, the
/// rest as the payload. Running out of bytes gives zeros, never a trap.
struct FuzzInput {
    let bytes: [UInt8]
    var position = 0

    init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: size))
    }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func uint32() -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = value << 8 | UInt32(byte()) }
        return value
    }

    mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return Int64(bitPattern: value)
    }

    /// Everything not consumed yet.
    mutating func rest() -> [UInt8] {
        defer { position = bytes.count }
        return position < bytes.count ? Array(bytes[position...]) : []
    }
}

/// A broken invariant is a finding: abort so that libFuzzer saves the input.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        fputs("fuzz invariant broken: \(message())\n", stderr)
        abort()
    }
}
