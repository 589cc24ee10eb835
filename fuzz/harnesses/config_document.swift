// The config document: two documents from one input, their values, exact
// texts and changed keys, and the cached row's codec round trip.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let split = Int(input.byte())
    let rest = input.rest()
    let cut = rest.isEmpty ? 0 : split % (rest.count + 1)
    let first = Array(rest[..<cut]), second = Array(rest[cut...])

    var documents: [ConfigDocument] = []
    for bytes in [first, second, rest] {
        _ = try? ConfigEndpoint.parsePayload(bytes, what: "fuzz")
        guard let document = try? ConfigDocument(bytes: bytes, what: "fuzz") else { continue }
        require(!document.text.utf8.contains(0), "a document with a raw NUL was accepted")
        for key in document.keys {
            require(document.value(key) != nil, "key \(key) has no value")
            let text = document.valueText(key) ?? ""
            require((try? JSON.parse(text)) != nil, "the text of \(key) is not JSON")
        }
        require(document.changedKeys(from: document).isEmpty, "a document differs from itself")
        _ = document.changedKeys(from: .empty)
        // A record as the library writes it: a wall time in the stored
        // range and an ETag that can go back out as a header (rows outside
        // these are refused as damaged, on purpose).
        let etag = document.keys.first.flatMap { key in
            key.utf8.count <= 1024 && key.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) ? key : nil
        }
        let wall = input.int64()
        let fetched = StoredWallTime.range.contains(wall) ? wall : Int64(wall.magnitude % 253_402_300_800_000)
        let record = ConfigCache.Record(document: document, etag: etag, version: input.int64(),
                                        fetchedWallMilliseconds: fetched)
        guard let back = try? ConfigCache.decode(ConfigCache.encode(record)) else {
            require(false, "a cached row does not read back")
            return 0
        }
        require(back.document.text == document.text, "the cached row changed the text")
        require(back.etag == record.etag && back.version == record.version
                && back.fetchedWallMilliseconds == record.fetchedWallMilliseconds, "the cached row changed its fields")
        documents.append(document)
    }
    if documents.count >= 2 {
        _ = documents[0].changedKeys(from: documents[1])
        _ = documents[1].changedKeys(from: documents[0])
    }
    // The same bytes as a stored row.
    _ = try? ConfigCache.decode(rest)
    return 0
}
