// Response bodies of each endpoint, as the client reads them: any status,
// any body. Reads (boards, ideas, comments, chat), writes' answers, error
// bodies, the config payload, the cached list members, and the upload
// status policy.
@testable import AppNorthCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let high = Int(input.byte()), low = Int(input.byte())
    let status = high & 0x80 != 0 ? (high << 8 | low) - 0x8000 : 100 + (high << 8 | low) % 500
    let body = input.rest()
    let response = HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)

    _ = UploadStatusPolicy.outcome(for: status)
    _ = UploadStatusPolicy.outcome(for: nil)
    let message = AppNorthClient.serverMessage(response)
    _ = AppNorthError.fromHTTP(status: status, message: message)
    if let text = try? AppNorthClient.objectText(response) {
        require(!text.utf8.contains(0), "a response with a raw NUL was accepted")
        for member in ["boards", "ideas", "comments", "messages"] {
            _ = try? AppNorthReadCache.array(from: text, member: member)
        }
        _ = try? IdeaQuery(json: text)
    }
    _ = try? ConfigEndpoint.parsePayload(body, what: "fuzz")
    return 0
}
