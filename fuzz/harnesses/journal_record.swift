// The event journal's record decoder (`JournalRecord.decode`) on any bytes:
// it never traps, every event it returns carries a 36-character id and
// survives a re-encode unchanged, and what it found is found again in a
// journal that holds only those records.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let decoded = JournalRecord.decode(bytes)
    require(decoded.damaged <= bytes.count, "more damaged stretches than bytes")
    var rewritten: [UInt8] = []
    for event in decoded.events {
        require(event.id.utf8.count == 36, "an event id is not 36 characters")
        rewritten += JournalRecord.encode(event.payload)
    }
    let again = JournalRecord.decode(rewritten)
    require(again.events == decoded.events, "re-encoded records decode differently")
    require(again.damaged == 0, "re-encoded records look damaged")
    return 0
}
