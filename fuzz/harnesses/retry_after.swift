// Retry-After: delay-seconds or an HTTP date, from a server, with any clock
// and any cap. The answer is nil or a delay within the cap.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let now = input.int64()
    let cap = Int(input.uint32() & 0x7FFF_FFFF)
    let header = String(decoding: input.rest(), as: UTF8.self)
    if let ms = RetryAfter.milliseconds(header, nowWallMs: now, capMs: cap) {
        require(ms >= 0 && ms <= cap, "delay \(ms) outside 0...\(cap)")
    }
    // The same value as a response header, looked up the way uploads do.
    let response = HTTPResponse(status: 429, headers: [("retry-after", header)], body: [])
    _ = RetryAfter.milliseconds(response.header("Retry-After"), nowWallMs: now, capMs: cap)
    return 0
}
