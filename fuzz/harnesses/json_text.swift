// JSON validation and exact-text splicing. For any text jansson accepts as
// an object: the member spans found in the text re-parse to the values
// jansson read, and the request bodies that splice the host's text in
// (feedback diagnostics, event properties) are valid JSON carrying it.
import CJansson
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let flags = size_t(JSON_DECODE_INT_AS_REAL)
    guard let parsed = try? bytes.withUnsafeBytes({ try JSON.parse($0, what: "fuzz", flags: flags) }) else {
        return 0
    }
    require(!bytes.contains(0), "text with a raw NUL byte was accepted")
    guard parsed.kind == .object else { return 0 }
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        try JSON.validateObject(text, what: "fuzz")
    } catch {
        require(false, "validateObject refused what parse accepted: \(error)")
    }

    guard let members = JSONText.objectMembers(bytes, in: JSONText.valueRange(bytes)) else {
        require(false, "no member spans for a valid object")
        return 0
    }
    var seen = Set<String>()
    for (key, span) in members.reversed() where seen.insert(key).inserted {
        let value = try? bytes[span].withUnsafeBytes { try JSON.parse($0, what: "span", flags: flags) }
        require(value != nil, "the span of \(key) is not JSON")
        if let value, let original = parsed[key] {
            require(value.isEqual(to: original), "the span of \(key) holds another value")
        }
    }
    require(seen.count == parsed.count, "spans name \(seen.count) keys, jansson \(parsed.count)")

    // Splicing: the bodies the library sends must carry the text as given.
    if bytes.count <= AppNorthFeedback.maxDiagnosticsBytes {
        let body = CommunityWrite.feedback(AppNorthFeedback(text: "t", diagnosticsJSON: text)).requestBody()
        let sent = try? body.withUnsafeBytes { try JSON.parse($0, what: "body", flags: flags) }
        require(sent?["diagnostics"].map { $0.isEqual(to: parsed) } == true, "feedback body lost the diagnostics")
    }
    let event = EventPayload.build(id: "i", name: "n\u{1}\"", timestampMs: Int64.min, propertiesJSON: text,
                                   anonymousID: "a", userID: nil, sessionID: "s")
    let sent = try? event.withUnsafeBytes { try JSON.parse($0, what: "event", flags: flags) }
    require(sent?["properties"].map { $0.isEqual(to: parsed) } == true, "event payload lost the properties")
    require(sent?["timestamp"]?.doubleValue == Double(Int64.min), "event timestamp spelled wrongly")
    return 0
}
