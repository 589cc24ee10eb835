/// The request body of an event batch: the stored payloads spliced into
/// `{"events":[...]}`, so properties reach the server exactly as the host
/// wrote them; and that body gzipped when the client compresses batches.
struct BatchBody: Sendable {
    let plain: [UInt8]
    let packed: [UInt8]?

    init(_ batch: [StoredEvent], _ compression: UploadCompression) {
        var body: [UInt8] = Array(#"{"events":["#.utf8)
        body.reserveCapacity(batch.reduce(16) { $0 + $1.payload.count + 1 })
        for (index, event) in batch.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += event.payload
        }
        body += Array("]}".utf8)
        plain = body
        packed = compression.pack(body, as: .eventBatch)
    }
}

/// A batch read, checked and encoded, possibly ahead of its turn (while
/// the batch before it was in flight), with what it was read under: it is
/// sent only if consent has not been revoked since (`generation`) and no
/// row has left the table other than by upload (`removals`).
struct PreparedBatch: Sendable {
    let events: [StoredEvent]
    let body: BatchBody
    let generation: UInt64
    let removals: UInt64
}
