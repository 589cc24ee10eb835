import XCTest
@testable import AppNorthCore

final class WritesTests: XCTestCase {
    var board = ""
    var ideaID = ""

    override func setUp() async throws {
        try TestServer.reset()
        board = try TestServer.board("swift", "Features")
        try TestServer.idea("swift", board: board, title: "Dark mode")
        ideaID = try JSON.parse(try TestServer.client().listIdeas())["ideas"]?.arrayElements.first?["id"]?.stringValue ?? ""
    }

    func state() throws -> JSON { try TestServer.get("/admin/apps/swift/state") }

    func testSubmitsIdeaCommentAndFeedback() throws {
        let client = try TestServer.client()
        let idea = try JSON.parse(try client.submitIdea(boardID: board, title: "Widgets", body: "please"))
        XCTAssertEqual(idea["idea"]?["title"]?.stringValue, "Widgets")
        try client.submitComment(handle: ideaID, body: "+1")
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 1, 2, 3]
        try client.submitFeedback(AppNorthFeedback(text: "it crashed", diagnosticsJSON: #"{"fps":59.90,"build":"1.2"}"#,
                                                   screenshots: [.init(contentType: "image/png", bytes: png)]))
        let stored = try state()
        XCTAssertEqual(stored["ideas"]?.count, 2)
        XCTAssertEqual(stored["comments"]?.arrayElements.first?["body"]?.stringValue, "+1")
        let feedback = stored["feedback"]?.arrayElements.first
        XCTAssertEqual(feedback?["text"]?.stringValue, "it crashed")
        XCTAssertEqual(feedback?["screenshots"]?.arrayElements.first?["size"]?.intValue, Int64(png.count))
        XCTAssertEqual(feedback?["diagnostics"]?["build"]?.stringValue, "1.2")
    }

    func testIdempotencyKeyAppliesOnceAndConflictsOnADifferentPayload() throws {
        let client = try TestServer.client()
        let first = try client.submitComment(handle: ideaID, body: "once", idempotencyKey: "k")
        let replay = try client.submitComment(handle: ideaID, body: "once", idempotencyKey: "k")
        XCTAssertEqual(first, replay)
        XCTAssertEqual(try state()["comments"]?.count, 1)
        XCTAssertThrowsError(try client.submitComment(handle: ideaID, body: "other", idempotencyKey: "k")) {
            guard case AppNorthError.conflict = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try client.submitComment(handle: ideaID, body: "x", idempotencyKey: " leading space"))
        XCTAssertThrowsError(try client.submitComment(handle: ideaID, body: "x", idempotencyKey: "tab\tkey"))
        XCTAssertNoThrow(try client.submitComment(handle: ideaID, body: "x", idempotencyKey: "inner space"))
    }

    func testGeneratedKeysAreSentWithEveryWrite() throws {
        try TestServer.delete("/admin/requests")
        let client = try TestServer.client()
        try client.submitComment(handle: ideaID, body: "a")
        try client.submitComment(handle: ideaID, body: "a")
        let log = try TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []
        let keys = log.filter { $0["method"]?.stringValue == "POST" }.compactMap { request in
            request["headers"]?.objectMembers.first { $0.key.lowercased() == "idempotency-key" }?.value.stringValue
        }
        XCTAssertEqual(keys.count, 2)
        XCTAssertNotEqual(keys.first, keys.last, "each write gets its own key")
    }

    func testVotesAndChat() throws {
        let client = try TestServer.client()
        try client.vote(ideaID: ideaID)
        XCTAssertThrowsError(try client.vote(ideaID: ideaID)) {
            guard case AppNorthError.conflict = $0 else { return XCTFail("\($0)") }
        }
        try client.sendChatMessage("hi")
        let messages = try JSON.parse(try client.listChatMessages())
        XCTAssertEqual(messages["messages"]?.arrayElements.first?["body"]?.stringValue, "hi")
        let comments = try JSON.parse(try client.listComments(ideaID: ideaID))
        XCTAssertEqual(comments["comments"]?.count, 0)
    }

    func testBadInputIsRefusedBeforeSending() throws {
        let client = try TestServer.client()
        XCTAssertThrowsError(try client.submitComment(handle: ideaID, body: "")) {
            guard case AppNorthError.validation = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try client.submitIdea(boardID: board, title: String(repeating: "t", count: 201))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        let huge = AppNorthFeedback.Screenshot(contentType: "image/png", bytes: [UInt8](repeating: 1, count: AppNorthFeedback.maxScreenshotBytes + 1))
        XCTAssertThrowsError(try client.submitFeedback(AppNorthFeedback(text: "t", screenshots: [huge]))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try client.submitFeedback(AppNorthFeedback(text: "t", diagnosticsJSON: "[1]"))) {
            guard case AppNorthError.invalidJSON = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try client.submitFeedback(AppNorthFeedback(
            text: "t", screenshots: [.init(contentType: "image/gif", bytes: [1])])))
        let bigDiagnostics = #"{"log":""# + String(repeating: "x", count: AppNorthFeedback.maxDiagnosticsBytes) + #""}"#
        XCTAssertThrowsError(try AppNorthFeedback.checkDiagnostics(bigDiagnostics)) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try client.submitFeedback(AppNorthFeedback(text: "t", diagnosticsJSON: bigDiagnostics))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        // Measured before parsing: oversize and invalid is still "too large".
        XCTAssertThrowsError(try AppNorthFeedback.checkDiagnostics(String(repeating: "[", count: AppNorthFeedback.maxDiagnosticsBytes + 1))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try AppNorthFeedback.checkText(String(repeating: "é", count: AppNorthFeedback.maxTextCharacters + 1))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertNoThrow(try AppNorthFeedback.checkText(String(repeating: "é", count: AppNorthFeedback.maxTextCharacters)))
        XCTAssertEqual(try state()["comments"]?.count, 0)
        XCTAssertEqual(try state()["feedback"]?.count, 0)
    }

    func testBase64() {
        XCTAssertEqual(Base64.encode(Array("".utf8)), "")
        XCTAssertEqual(Base64.encode(Array("f".utf8)), "Zg==")
        XCTAssertEqual(Base64.encode(Array("fo".utf8)), "Zm8=")
        XCTAssertEqual(Base64.encode(Array("foo".utf8)), "Zm9v")
        XCTAssertEqual(Base64.encode([0xFF, 0xFE, 0xFD, 0xFC]), "//79/A==")
    }
}
