import CZlib

/// gzip (RFC 1952) through zlib, for `Content-Encoding: gzip` request
/// bodies. One call compresses a whole body already in memory.
package enum Gzip {
    /// zlib's level 6 (its default): event JSON shrinks several-fold, and
    /// compressing a 30 KB batch costs well under a millisecond.
    package static let defaultLevel: Int32 = 6

    /// The gzip member for `bytes`, or nil when zlib fails (out of memory)
    /// or the input is beyond zlib's 32-bit lengths: then send it as is.
    package static func compress(_ bytes: [UInt8], level: Int32 = defaultLevel) -> [UInt8]? {
        guard bytes.count < Int(UInt32.max / 2), (-1...9).contains(level) else { return nil }
        var stream = z_stream()
        guard czlib_deflate_init_gzip(&stream, level) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        // With all input and this much room, one Z_FINISH call completes.
        let bound = Int(deflateBound(&stream, uLong(bytes.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let result: Int32 = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                // zlib only reads next_in; its type is not const without Z_CONST.
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard result == Z_STREAM_END else { return nil }
        let produced = Int(stream.total_out)
        guard produced <= bound else { return nil }
        output.removeSubrange(produced...)
        return output
    }
}
