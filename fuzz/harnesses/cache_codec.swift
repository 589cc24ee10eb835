// The read cache's stored blob: entries that decode round-trip unchanged,
// and a stored value's list member can be read as the cache reads it.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let entries = try? CacheCodec.decode(bytes) else { return 0 }
    let again = (try? CacheCodec.decode(CacheCodec.encode(entries))) ?? []
    require(again.count == entries.count, "cache entries lost on a round trip")
    for (a, b) in zip(entries, again) {
        require(a.kind == b.kind && a.scope == b.scope && a.query == b.query && a.value == b.value
                && a.storedWallMs == b.storedWallMs, "a cache entry changed on a round trip")
        _ = try? AppNorthReadCache.array(from: a.value, member: a.kind.rawValue)
    }
    return 0
}
