import XCTest
@testable import AppNorthCore

/// The response fields the core reads (ETag, Retry-After) through the real
/// transport: a whole answer takes them from curl once done
/// (HTTPResponse.readFields), a stream from its header callback
/// (HTTPHeaderLine). The dev server's raw_response fault sends the bytes.
final class ResponseFieldsTests: XCTestCase {
    private let path = "/v1/apps/swift/boards"

    override func setUp() async throws {
        try TestServer.reset()
    }

    /// The answer to one GET whose whole reply is `raw`.
    private func answer(_ raw: [UInt8]) throws -> HTTPResponse {
        try TestServer.post("/admin/faults", #"{"path_prefix":"\#(path)","raw_response":"\#(Base64.encode(raw))"}"#)
        return try HTTPTransport().perform(HTTPRequest(method: .get, url: try TestServer.url() + path))
    }

    private func answer(_ raw: String) throws -> HTTPResponse { try answer(Array(raw.utf8)) }

    func testTheFirstOfDuplicatesTrimmedAnyCase() throws {
        let response = try answer("HTTP/1.1 503 Busy\r\nretry-after:   7 \r\nRetry-After: 9\r\netag: \"v1\"\r\n"
                                  + "X-Other: x\r\nContent-Length: 2\r\n\r\n{}")
        XCTAssertEqual(response.status, 503)
        XCTAssertEqual(response.header("Retry-After"), "7")
        XCTAssertEqual(response.header("ETAG"), "\"v1\"")
        XCTAssertEqual(RetryAfter.milliseconds(for: response, nowWallMs: 0, capMs: 60_000), 7000)
        if CurlFeatures.keepsFields {
            XCTAssertEqual(response.headers.map(\.name), ["ETag", "Retry-After"], "only the fields the core reads are kept")
        }  // else (libcurl before 7.83) every field came through the header callback
    }

    func testOnlyTheLastResponsesFieldsCount() throws {
        let response = try answer("HTTP/1.1 100 Continue\r\nETag: \"old\"\r\n\r\n"
                                  + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        XCTAssertEqual(response.status, 200)
        XCTAssertNil(response.header("ETag"))
    }

    func testOddValuesNeverTrap() throws {
        let folded = try answer("HTTP/1.1 200 OK\r\nETag: \"a\"\r\n  more\r\nContent-Length: 2\r\n\r\n{}")
        XCTAssertEqual(folded.status, 200)
        XCTAssertEqual(folded.header("ETag"), "\"a\" more", "curl joins a folded line with one space")
        XCTAssertNil(EntityTag.validated(folded.header("ETag")), "which is no entity tag: ignored")
        let bytes: [UInt8] = Array("HTTP/1.1 200 OK\r\nETag: \"".utf8) + [0xFF, 0xC3] + Array("\"\r\nRetry-After:\r\nContent-Length: 2\r\n\r\n{}".utf8)
        let repaired = try answer(bytes)
        XCTAssertEqual(repaired.header("ETag"), "\"\u{FFFD}\u{FFFD}\"")
        XCTAssertNil(RetryAfter.milliseconds(repaired.header("Retry-After"), nowWallMs: 0, capMs: 1000), "empty value")
        let long = try answer("HTTP/1.1 200 OK\r\nETag: \"" + String(repeating: "e", count: HTTPHeaderLine.maxLineBytes) + "\"\r\n"
                              + "Content-Length: 2\r\n\r\n{}")
        XCTAssertEqual(long.status, 200)
        XCTAssertNil(long.header("ETag"), "longer than maxLineBytes")
    }

    func testAStreamsRefusalCarriesItsRetryAfter() throws {
        try TestServer.post("/admin/faults", #"{"path_prefix":"\#(path)","status":503,"retry_after":"4"}"#)
        let response = try HTTPTransport().stream(HTTPRequest(method: .get, url: try TestServer.url() + path),
                                                  idleTimeoutMs: 5000, cancel: CancellationToken()) { _ in true }
        XCTAssertEqual(response.status, 503)
        XCTAssertEqual(response.header("retry-after"), "4")
    }
}
