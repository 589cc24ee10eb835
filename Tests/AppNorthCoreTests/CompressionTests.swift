import XCTest
@testable import AppNorthCore

/// gzip uploads against the real dev server: event batches compressed,
/// writes from 1 KiB up compressed, small writes as they are, and a 415
/// answer to gzip taken as "this server does not do gzip", remembered.
final class CompressionTests: EventsTestCase {
    /// The API requests the server logged for `path` (method POST), oldest first.
    func posts(_ path: String) throws -> [JSON] {
        (try TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
            $0["method"]?.stringValue == "POST" && $0["path"]?.stringValue == path
        }
    }

    func encodings(_ log: [JSON]) -> [String] { log.compactMap { $0["content_encoding"]?.stringValue } }

    func testGzipMakesAGzipMemberThatShrinksEventJSON() throws {
        let json = Array(String(repeating: #"{"id":"0190a1b2-c3d4-7e5f","name":"screen_view","properties":{"screen":"home"}},"#,
                                count: 100).utf8)
        let packed = try XCTUnwrap(Gzip.compress(json))
        XCTAssertEqual(Array(packed.prefix(3)), [0x1F, 0x8B, 8], "gzip magic and deflate method")
        XCTAssertLessThan(packed.count * 5, json.count)
        let empty = try XCTUnwrap(Gzip.compress([]))
        XCTAssertEqual(empty.count, 20, "header, an empty deflate block, CRC and length")
        XCTAssertNil(Gzip.compress(json, level: 42), "a level zlib does not have is refused, not trapped")
    }

    func testEventBatchesArriveGzipEncodedAndAreStoredExactlyOnce() throws {
        let events = try open(quiet { $0.networkType = .wifi })
        for i in 0..<150 { try events.track("screen_view", propertiesJSON: #"{"screen":"home","i":\#(i)}"#) }
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 150)
        let log = try posts("/v1/apps/swift/events")
        XCTAssertEqual(log.count, 2, "Wi-Fi batches of 100")
        XCTAssertEqual(encodings(log), ["gzip", "gzip"])
        for entry in log {
            let wire = entry["wire_size"]?.intValue ?? 0, plain = entry["body_size"]?.intValue ?? 0
            XCTAssertGreaterThan(wire, 0)
            XCTAssertGreaterThan(plain, 3 * wire, "event JSON compresses several-fold")
        }
        let stored = try serverEvents()
        XCTAssertEqual(stored.count, 150)
        XCTAssertEqual(Set(stored.compactMap { $0["id"]?.stringValue }).count, 150)
        XCTAssertEqual(stored.last?["properties_raw"]?.stringValue, #"{"screen":"home","i":149}"#)
        events.close(timeoutMilliseconds: 0)
    }

    func testSmallWritesStayIdentityAndLargeWritesAreCompressed() throws {
        let board = try TestServer.board("swift", "Features")
        try TestServer.idea("swift", board: board, title: "Dark mode")
        let client = try TestServer.client()
        let idea = try JSON.parse(try client.listIdeas())["ideas"]?.arrayElements.first?["id"]?.stringValue ?? ""
        let long = String(repeating: "a longer comment, ", count: 100)
        try client.submitComment(handle: idea, body: "+1")
        try client.submitComment(handle: idea, body: long)
        let log = try posts("/v1/apps/swift/ideas/\(idea)/comments")
        XCTAssertEqual(encodings(log), ["identity", "gzip"])
        XCTAssertLessThan(log.last?["wire_size"]?.intValue ?? .max, Int64(UploadCompression.writeThresholdBytes))
        let comments = try TestServer.get("/admin/apps/swift/state")["comments"]?.arrayElements ?? []
        XCTAssertEqual(comments.compactMap { $0["body"]?.stringValue }, ["+1", long])
    }

    func testAQueuedLargeWriteIsReplayedCompressedOnce() throws {
        let board = try TestServer.board("swift", "Features")
        try TestServer.idea("swift", board: board, title: "Dark mode")
        let client = try TestServer.client()
        let idea = try JSON.parse(try client.listIdeas())["ideas"]?.arrayElements.first?["id"]?.stringValue ?? ""
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let long = String(repeating: "written offline, ", count: 100)
        let sentNow = try TestServer.offline {
            try queue.submitComment(using: client, handle: idea, body: long, idempotencyKey: "q1")
        }
        XCTAssertFalse(sentNow)
        XCTAssertEqual(try queue.flush(using: client), 1)
        let log = try posts("/v1/apps/swift/ideas/\(idea)/comments")
        XCTAssertEqual(log.last.map { $0["status"]?.intValue ?? 0 }, 201)
        XCTAssertEqual(log.last?["content_encoding"]?.stringValue, "gzip")
        XCTAssertEqual((try TestServer.get("/admin/apps/swift/state")["comments"]?.arrayElements ?? [])
            .compactMap { $0["body"]?.stringValue }, [long])
        XCTAssertEqual(try queue.pendingCount(), 0)
    }

    func testA415ToGzipFallsBackToIdentityAndIsRemembered() throws {
        try TestServer.post("/admin/settings", #"{"accept_gzip":false}"#)
        let client = try TestServer.client()
        let events = try open(quiet(), client: client)
        for i in 0..<3 { try events.track("e\(i)") }
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 3)
        var log = try posts("/v1/apps/swift/events")
        XCTAssertEqual(log.map { $0["status"]?.intValue ?? 0 }, [415, 200])
        XCTAssertEqual(encodings(log), ["gzip", "identity"])
        XCTAssertTrue(client.compression.refused)

        // Remembered: the next batch and a large write go as they are at once.
        try events.track("e3")
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 1)
        log = try posts("/v1/apps/swift/events")
        XCTAssertEqual(encodings(log), ["gzip", "identity", "identity"])
        try client.submitFeedback(AppNorthFeedback(text: String(repeating: "long feedback ", count: 200)))
        XCTAssertEqual(encodings(try posts("/v1/apps/swift/feedback")), ["identity"])

        let stored = try serverEvents()
        XCTAssertEqual(stored.count, 4, "nothing lost or doubled by the refusal")
        XCTAssertEqual(Set(stored.compactMap { $0["id"]?.stringValue }).count, 4)
        XCTAssertEqual(events.queuedCount, 0)
        // Another client still tries gzip: the memory is per client.
        XCTAssertFalse(try TestServer.client().compression.refused)
        events.close(timeoutMilliseconds: 0)
    }

    func testAWriteRefusedWith415IsResentOnceWithItsKey() throws {
        try TestServer.post("/admin/settings", #"{"accept_gzip":false}"#)
        let client = try TestServer.client()
        let text = String(repeating: "long feedback ", count: 200)
        try client.submitFeedback(AppNorthFeedback(text: text), idempotencyKey: "fb-1")
        let log = try posts("/v1/apps/swift/feedback")
        XCTAssertEqual(log.map { $0["status"]?.intValue ?? 0 }, [415, 201])
        let keys = log.compactMap { $0["headers"]?["Idempotency-Key"]?.stringValue }
        XCTAssertEqual(keys, ["fb-1", "fb-1"])
        XCTAssertEqual(try TestServer.get("/admin/apps/swift/state")["feedback"]?.arrayElements.count, 1)
    }

    func testResponsesAreAcceptedGzipEncoded() throws {
        try TestServer.post("/admin/settings", #"{"gzip_responses":true}"#)
        let board = try TestServer.board("swift", "Features")
        let boards = try JSON.parse(try TestServer.client().listBoards())
        XCTAssertEqual(boards["boards"]?.arrayElements.first?["id"]?.stringValue, board)
        let get = try XCTUnwrap((try TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).last)
        XCTAssertEqual(get["headers"]?["Accept-Encoding"]?.stringValue, "gzip")
    }

    func testCompressionTurnedOffSendsIdentity() throws {
        var configuration = try AppNorthClientConfiguration(apiURL: try TestServer.url(), appID: "swift")
        configuration.compressUploads = false
        let client = AppNorthClient(configuration: configuration)
        let events = try open(quiet(), client: client)
        for i in 0..<20 { try events.track("e\(i)") }
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 20)
        XCTAssertEqual(encodings(try posts("/v1/apps/swift/events")), ["identity"])
        XCTAssertFalse(client.compression.refused)
        events.close(timeoutMilliseconds: 0)
    }
}
