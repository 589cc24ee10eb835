import Synchronization

/// Which request bodies a client sends gzip-compressed, and what it learnt
/// from the server: a 415 (Unsupported Media Type) answer to a gzip body
/// turns compression off for the rest of that client's life.
///
/// Event batches are always compressed (several-fold smaller); write bodies
/// from `writeThresholdBytes` up (a write is usually a few hundred bytes,
/// where gzip's 18-byte frame and the CPU buy nothing).
package final class UploadCompression: Sendable {
    /// Write bodies this size or larger are compressed.
    package static let writeThresholdBytes = 1024

    /// What a request carries.
    package enum Body: Sendable {
        /// An event batch: compressed whenever compression is on.
        case eventBatch
        /// A write: compressed from `writeThresholdBytes` up.
        case write

        /// zlib's level: 1 for event batches, which the upload thread
        /// gzips back to back (a 30 KB batch of the flush benchmark's
        /// events: about 1.7 times faster than level 6, 6 % larger);
        /// zlib's default, 6, for a write.
        var level: Int32 { self == .eventBatch ? 1 : Gzip.defaultLevel }
    }

    /// The host's choice (appnorth_client_options_set_compression).
    package let enabled: Bool
    private let refusedByServer = Atomic<Bool>(false)

    package init(enabled: Bool = true) {
        self.enabled = enabled
    }

    /// True once the server answered 415 to a gzip body: this client sends
    /// identity from then on.
    package var refused: Bool { refusedByServer.load(ordering: .acquiring) }

    /// Remembers a 415 answer to a gzip body. Returns true the first time.
    @discardableResult
    package func noteRefused() -> Bool {
        !refusedByServer.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Whether a body of this kind and size goes compressed now.
    package func applies(to body: Body, size: Int) -> Bool {
        guard enabled, !refused, size > 0 else { return false }
        switch body {
        case .eventBatch: return true
        case .write: return size >= Self.writeThresholdBytes
        }
    }

    /// The request with a gzip body and `Content-Encoding: gzip`, or nil
    /// when it goes as it is (compression off or refused, a small write, a
    /// zlib failure).
    /// `packed`: the body already gzipped (an event batch prepared while
    /// the one before it was in flight), used when compression still applies.
    package func compressed(_ request: HTTPRequest, as body: Body, packed: [UInt8]? = nil) -> HTTPRequest? {
        guard let plain = request.body, applies(to: body, size: plain.count),
              let packed = packed ?? Gzip.compress(plain, level: body.level) else { return nil }
        var out = request
        out.body = packed
        out.headers.append(("Content-Encoding", "gzip"))
        return out
    }

    /// `body` gzipped if a body of this kind and size goes compressed now;
    /// nil otherwise (or on a zlib failure).
    package func pack(_ body: [UInt8], as kind: Body) -> [UInt8]? {
        applies(to: kind, size: body.count) ? Gzip.compress(body, level: kind.level) : nil
    }
}
