// The Server-Sent Events parser, fed whole and in fuzz-chosen chunks: the
// events must not depend on where the chunks split. Each event's data then
// goes through the config payload reader, as the live stream does.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let maxEventBytes = 16 + Int(input.byte()) * 16
    var cuts = (0..<Int(input.byte() % 8)).map { _ in Int(input.byte()) }
    let stream = input.rest()
    cuts = cuts.map { stream.isEmpty ? 0 : $0 % (stream.count + 1) }.sorted()

    var whole = ServerSentEventParser(maxEventBytes: maxEventBytes)
    let expected = whole.feed(stream)
    var chunked = ServerSentEventParser(maxEventBytes: maxEventBytes)
    var got: [ServerSentEvent] = []
    var start = 0
    for cut in cuts + [stream.count] {
        got += chunked.feed(stream[start..<cut])
        start = cut
    }
    require(got == expected, "events differ when the stream is split at \(cuts)")
    require(whole.lastEventID == chunked.lastEventID, "last event id differs")
    require(whole.retryMilliseconds == chunked.retryMilliseconds, "retry differs")
    require(whole.oversizeEvents == chunked.oversizeEvents, "oversize count differs")
    for event in expected {
        require(event.data.count <= maxEventBytes, "an event over the limit was dispatched")
        if let (document, _) = try? ConfigEndpoint.parsePayload(event.data, what: "fuzz") {
            require(!document.text.utf8.contains(0), "a config with a raw NUL was accepted")
        }
    }
    return 0
}
