// The offline queue's stored blob: whatever decodes must encode and decode
// back to the same entries.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let entries = try? QueueCodec.decode(bytes) else { return 0 }
    let again = try? QueueCodec.decode(QueueCodec.encode(entries))
    require(again == entries, "queue entries change on a round trip")
    return 0
}
