import AppNorth
import Foundation
import XCTest

/// The typed models against the server's own responses: every field the
/// server sends is decoded, and encoding gives back the same JSON object.
final class ModelsTests: ServerTestCase {
    var client: AppNorthClient!

    override func setUp() async throws {
        try await super.setUp()
        for n in 2...3 { try TestServer.idea("swiftapi", board: boardID, title: "Idea \(n)") }
        client = try TestServer.client()
        XCTAssertTrue(try client.submitComment(handle: ideaID, body: "Yes please").contains("comment"))
    }

    /// The same JSON object, compared as parsed values.
    func assertSameJSON(_ encoded: some Encodable, _ serverText: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let ours = try JSONSerialization.jsonObject(with: JSONEncoder().encode(encoded)) as? NSDictionary
        let theirs = try JSONSerialization.jsonObject(with: Data(serverText.utf8)) as? NSDictionary
        XCTAssertNotNil(ours, file: file, line: line)
        XCTAssertEqual(ours, theirs, file: file, line: line)
    }

    func testBoardsPageMatchesTheServer() async throws {
        let page = try await client.fetchBoards()
        XCTAssertEqual(page.boards.count, 1)
        let board = page.boards[0]
        XCTAssertEqual(board.id, boardID)
        XCTAssertEqual(board.name, "Features")
        XCTAssertEqual(board.description, "d")
        XCTAssertGreaterThan(board.createdAtMilliseconds, 1_600_000_000_000)
        XCTAssertEqual(board.createdAt.timeIntervalSince1970, Double(board.createdAtMilliseconds) / 1000, accuracy: 0.001)
        try assertSameJSON(page, try client.listBoards())
    }

    func testIdeasPagesFollowTheCursor() async throws {
        let first = try await client.fetchIdeas(IdeaQuery(limit: 2))
        XCTAssertEqual(first.ideas.map(\.title), ["Dark mode", "Idea 2"])
        let idea = first.ideas[0]
        XCTAssertEqual(idea.id, ideaID)
        XCTAssertEqual(idea.boardID, boardID)
        XCTAssertEqual(idea.body, "b")
        XCTAssertEqual(idea.status, "open")
        XCTAssertEqual(idea.votes, 0)
        XCTAssertEqual(idea.commentCount, 1)
        XCTAssertEqual(idea.author, "admin")
        let cursor = try XCTUnwrap(first.nextCursor)
        try assertSameJSON(first, try client.listIdeas(IdeaQuery(limit: 2)))

        let last = try await client.fetchIdeas(IdeaQuery(cursor: cursor, limit: 2))
        XCTAssertEqual(last.ideas.map(\.title), ["Idea 3"])
        XCTAssertNil(last.nextCursor)
        let lastText = try client.listIdeas(IdeaQuery(cursor: cursor, limit: 2))
        XCTAssertTrue(lastText.contains(#""next_cursor": null"#) || lastText.contains(#""next_cursor":null"#))
    }

    func testCommentsPageMatchesTheServer() async throws {
        let page = try await client.fetchComments(ideaID: ideaID)
        XCTAssertEqual(page.comments.map(\.body), ["Yes please"])
        XCTAssertEqual(page.comments[0].ideaID, ideaID)
        XCTAssertEqual(page.comments[0].author, "anonymous")
        try assertSameJSON(page, try client.listComments(ideaID: ideaID))
    }

    /// A response that does not match the models is an error, not a trap:
    /// a wrong type, a missing field, a number beyond Int64.
    func testMismatchedResponsesAreErrors() async throws {
        let bodies = [#"{"boards":[{"id":"b_1","name":5,"description":"","created_at":1}]}"#,
                      #"{"boards":[{"id":"b_1","description":"","created_at":1}]}"#,
                      #"{"boards":[{"id":"b_1","name":"n","description":"","created_at":1e300}]}"#]
        for body in bodies {
            let raw = Data("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
            try TestServer.post("/admin/faults", #"{"raw_response":"\#(raw.base64EncodedString())","count":1}"#)
            do {
                _ = try await client.fetchBoards()
                XCTFail("\(body) decoded")
            } catch AppNorthError.invalidJSON {}
        }
    }
}
