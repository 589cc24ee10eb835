import XCTest
@testable import AppNorthCore

/// Issue 23, classes 4 to 6 as units (the hostile-server versions run
/// against the dev server in bindings/python/tests/test_hostile_server.py).
final class ServerTextTests: XCTestCase {
    func testControlBytesAreEscapedAndTheRestKept() {
        XCTAssertEqual(Text.escapingControls("plain é ✓"), "plain é ✓")
        XCTAssertEqual(Text.escapingControls("a\r\nb\u{1B}]0;t\u{07}\u{7F}"), "a\\x0D\\x0Ab\\x1B]0;t\\x07\\x7F")
        XCTAssertEqual(Text.escapingControls("csi\u{9B}2J"), "csi\\u{9B}2J")
        XCTAssertEqual(Text.escapingControls("tab\tnul\u{0}"), "tab\\x09nul\\x00")
    }

    func testEveryLogLineIsEscaped() {
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .debug, sink: { _, line in lines.withLock { $0.append(line) } })
        logger.log(.warning, "upload failed: HTTP 500 boom: x\r\n[appnorth ERROR] forged")
        XCTAssertEqual(lines.withLock { $0 }, ["upload failed: HTTP 500 boom: x\\x0D\\x0A[appnorth ERROR] forged"])
    }

    func testServerErrorMessagesAreEscaped() {
        let body = Array(#"{"error":{"code":"a\r\nb","message":"m\u001b[2J"}}"#.utf8)
        let message = HTTPResponse(status: 400, headers: [], body: body).serverMessage
        XCTAssertEqual(message, "HTTP 400 a\\x0D\\x0Ab: m\\x1B[2J")
    }

    /// Issue 31: a server's message reaches errors and log lines as a
    /// bounded excerpt, whatever its size, cut on a Unicode scalar.
    func testServerMessagesAreBoundedExcerpts() {
        let huge = String(repeating: "é\u{1B}", count: 200_000)  // 600,000 bytes, half of it control bytes
        let body = Array(#"{"error":{"code":""#.utf8) + Array(String(repeating: "c", count: 1000).utf8)
            + Array(#"","message":""#.utf8) + Array(huge.replacingOccurrences(of: "\u{1B}", with: "\\u001b").utf8)
            + Array(#""}}"#.utf8)
        let message = HTTPResponse(status: 500, headers: [], body: body).serverMessage
        XCTAssertLessThan(message.utf8.count, 4 * (HTTPResponse.maxCodeExcerpt + HTTPResponse.maxMessageExcerpt) + 100)
        XCTAssertTrue(message.hasPrefix("HTTP 500 " + String(repeating: "c", count: 64) + "… (+936 bytes): é\\x1Bé"), message)
        XCTAssertTrue(message.hasSuffix("… (+599232 bytes)"), String(message.suffix(40)))
        XCTAssertEqual(Text.excerpt("short", 5), "short")
        XCTAssertEqual(Text.excerpt("ééé", 2), "éé… (+2 bytes)")
        XCTAssertEqual(Text.excerpt("x", 0), "… (+1 bytes)")
    }

    func testEntityTagsFollowRFC9110() {
        for good in [#""1""#, #"W/"abc""#, #""""#, #""\#u{E9}x!#~""#] { XCTAssertEqual(EntityTag.validated(good), good, good) }
        for bad in ["1", #""1"#, "\"1\r\"", "\"a b\"", "\"a\"b\"", "W/1", "w/\"1\"", " \"1\"",
                    "\"" + String(repeating: "x", count: EntityTag.maxBytes) + "\""] {
            XCTAssertNil(EntityTag.validated(bad), bad)
        }
        XCTAssertNil(EntityTag.validated(nil))
    }

    func testIdsAreOneSegmentAndDotSegmentsRefused() {
        XCTAssertEqual(Text.pathSegment("../a/b?c#d%"), "..%2Fa%2Fb%3Fc%23d%25")
        XCTAssertThrowsError(try requireID("..", "idea_id"))
        XCTAssertThrowsError(try requireID(".", "idea_id"))
        XCTAssertNoThrow(try requireID("...", "idea_id"))
    }
}
