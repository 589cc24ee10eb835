import XCTest
@testable import AppNorthCore

/// The client and transport against the real local server.
final class ClientTests: XCTestCase {
    override func setUp() async throws {
        try TestServer.reset()
    }

    func testListsBoardsAndFiltersIdeas() throws {
        let features = try TestServer.board("swift", "Features")
        let bugs = try TestServer.board("swift", "Bugs")
        try TestServer.idea("swift", board: features, title: "Dark mode")
        try TestServer.idea("swift", board: features, title: "Widgets", status: "planned")
        try TestServer.idea("swift", board: bugs, title: "Crash on dark start")

        let client = try TestServer.client()
        let boards = try JSON.parse(try client.listBoards())
        XCTAssertEqual(boards["boards"]?.arrayElements.compactMap { $0["name"]?.stringValue }, ["Features", "Bugs"])

        let onFeatures = try JSON.parse(try client.listIdeas(IdeaQuery(board: features)))
        XCTAssertEqual(onFeatures["ideas"]?.count, 2)
        let dark = try JSON.parse(try client.listIdeas(IdeaQuery(search: "dark")))
        XCTAssertEqual(dark["ideas"]?.count, 2)
        let planned = try JSON.parse(try client.listIdeas(IdeaQuery(status: "planned")))
        XCTAssertEqual(planned["ideas"]?.arrayElements.first?["title"]?.stringValue, "Widgets")

        let first = try JSON.parse(try client.listIdeas(IdeaQuery(limit: 2)))
        XCTAssertEqual(first["ideas"]?.count, 2)
        let cursor = try XCTUnwrap(first["next_cursor"]?.stringValue)
        let second = try JSON.parse(try client.listIdeas(IdeaQuery(cursor: cursor, limit: 2)))
        XCTAssertEqual(second["ideas"]?.count, 1)
        XCTAssertEqual(second["next_cursor"]?.isNull, true)
    }

    func testErrorsMapToTheTaxonomy() throws {
        let client = try TestServer.client()
        XCTAssertThrowsError(try client.listIdeas(IdeaQuery(board: "nope"))) {
            guard case AppNorthError.notFound = $0 else { return XCTFail("\($0)") }
        }
        try TestServer.post("/admin/faults", #"{"status":500,"count":1}"#)
        XCTAssertThrowsError(try client.listBoards()) {
            XCTAssertEqual(($0 as? AppNorthError)?.httpStatus, 500)
            guard case AppNorthError.server = $0 else { return XCTFail("\($0)") }
        }
        try TestServer.post("/admin/users", #"{"app":"swift","email":"ada@example.com","token":"good"}"#)
        let wrong = try TestServer.client(credential: AppNorthCredential(email: "Ada@example.com", token: "bad"))
        XCTAssertThrowsError(try wrong.listBoards()) {
            guard case AppNorthError.authentication(_, 401) = $0 else { return XCTFail("\($0)") }
        }
        let right = try TestServer.client(credential: AppNorthCredential(email: "Ada@example.com", token: "good"))
        XCTAssertNoThrow(try right.listBoards())
    }

    func testUnreachableServerIsANetworkError() throws {
        let client = AppNorthClient(configuration: try AppNorthClientConfiguration(apiURL: "http://127.0.0.1:9", appID: "a"))
        XCTAssertThrowsError(try client.listBoards()) {
            guard case AppNorthError.network = $0 else { return XCTFail("\($0)") }
        }
    }

    func testKeepAliveReusesTheConnection() throws {
        let transport = HTTPTransport()
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        _ = try transport.perform(HTTPRequest(method: .get, url: url))
        let second = try transport.perform(HTTPRequest(method: .get, url: url))
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.connectionsOpened, 0, "the second request reused the kept-alive connection")
    }

    func testCancellableTransfersKeepTheirConnectionToo() throws {
        // Event uploads pass a cancellation; each batch must not pay for a
        // new connection (a regression the flush benchmark caught).
        let transport = HTTPTransport()
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        let cancel = CancellationToken()
        _ = try transport.perform(HTTPRequest(method: .get, url: url), cancel: cancel)
        let second = try transport.perform(HTTPRequest(method: .get, url: url), cancel: cancel)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.connectionsOpened, 0)
    }

    func testMalformedAnswersLeaveTheTransportWorking() throws {
        // Found by the transport fuzz harness: this pair of answers made
        // libcurl 7.88 read freed memory when the easy handle was reused
        // (ASan: heap-use-after-free in its header unfolding). Now every
        // transfer gets a fresh easy handle; keep-alive lives in the pool.
        let transport = HTTPTransport()
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        _ = try transport.perform(HTTPRequest(method: .get, url: url))
        let answers = ["HTTP/1.1 200 OK\r\nETag: \"2\"\rC\nontent-Length: \r35\n\r\n{\"rsion\":2,\"config\":{\"a\":9.99}} ",
                       "HTTP/1.1 304 Not Modified\r\u{8}ETag 2\n Moevent:\"1\" ng\r\nco&n"]
        for answer in answers {
            try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/swift/boards","raw_response":"\#(Base64.encode(Array(answer.utf8)))"}"#)
            do {
                let response = try transport.perform(HTTPRequest(method: .get, url: url))
                XCTAssertTrue((100...599).contains(response.status), "\(response.status)")
            } catch {
                guard case AppNorthError.network = error else { return XCTFail("\(error)") }
            }
        }
        let after = try transport.perform(HTTPRequest(method: .get, url: url))
        XCTAssertEqual(after.status, 200)
        XCTAssertEqual(try JSON.parse(after.body)["boards"]?.kind, .array)
    }

    func testAPIAndResourceTimeoutsAreSeparate() throws {
        let transport = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 300, resourceDownloadMilliseconds: 5000))
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        try TestServer.post("/admin/faults", #"{"delay_ms":800,"count":2}"#)
        XCTAssertThrowsError(try transport.perform(HTTPRequest(method: .get, url: url, kind: .api))) {
            guard case AppNorthError.network(let message) = $0 else { return XCTFail("\($0)") }
            XCTAssertTrue(message.lowercased().contains("timeout") || message.lowercased().contains("timed out"), message)
        }
        XCTAssertEqual(try transport.perform(HTTPRequest(method: .get, url: url, kind: .resource)).status, 200)
        XCTAssertEqual(HTTPTimeouts.default.apiRequestMilliseconds, 30_000)
        XCTAssertEqual(HTTPTimeouts.default.resourceDownloadMilliseconds, 60_000)
    }

    func testStreamsAServerSentEvent() throws {
        try TestServer.post("/admin/apps/swift/config", #"{"config":{"theme":"dark"}}"#)
        let transport = HTTPTransport()
        let cancel = CancellationToken()
        var received: [UInt8] = []
        XCTAssertThrowsError(try transport.stream(
            HTTPRequest(method: .get, url: try TestServer.url() + "/v1/apps/swift/config/stream",
                        headers: [("Accept", "text/event-stream")]),
            idleTimeoutMs: 5000, cancel: cancel) { chunk in
                received += chunk
                // Stop once one whole event has arrived.
                return !String(decoding: received, as: UTF8.self).contains("\n\n")
            })
        let text = String(decoding: received, as: UTF8.self)
        XCTAssertTrue(text.contains("event: config"), text)
        XCTAssertTrue(text.contains(#""theme":"dark""#), text)
    }

    func testResponsesOverTheLimitAreRefused() throws {
        let transport = HTTPTransport(maxResponseBytes: 10)
        _ = try TestServer.board("swift", "A board with a long enough name")
        XCTAssertThrowsError(try transport.perform(HTTPRequest(method: .get, url: try TestServer.url() + "/v1/apps/swift/boards"))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
    }

    /// A held request ends with `.cancelled` soon after another thread
    /// cancels (the server holds it 20 s; the bound allows a loaded
    /// machine), and calls after the cancel run normally.
    func testCancelEndsTheRequestInFlightOnly() throws {
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000))
        try TestServer.post("/admin/faults", #"{"delay_ms":600000,"count":1,"path_prefix":"/v1/apps/swift/boards"}"#)
        let cancelledAt = Lock<ContinuousClock.Instant?>(nil, level: LockClass.test)
        let canceller = Thread {
            // Wait until the server took the request (its fault is gone).
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline,
                  (try? TestServer.get("/admin/faults"))?["faults"]?.arrayElements.isEmpty == false {
                Thread.sleep(forTimeInterval: 0.02)
            }
            Thread.sleep(forTimeInterval: 0.1)
            cancelledAt.withLock { $0 = ContinuousClock.now }
            client.cancelInFlight()
        }
        canceller.start()
        XCTAssertThrowsError(try client.listBoards()) {
            guard case AppNorthError.cancelled = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertNotNil(cancelledAt.withLock { $0 }, "the canceller ran")
        // The server holds the read until the release: only the cancel can have ended it.
        XCTAssertEqual(try TestServer.held(), 1, "the cancel ended the read while the server still held it")
        try TestServer.release()
        XCTAssertEqual(try JSON.parse(Array(try client.listBoards().utf8))["boards"]?.kind, .array)
        client.cancelInFlight()  // nothing in flight: no effect on later calls
        XCTAssertNoThrow(try client.listBoards())
    }
}
