import XCTest
@testable import AppNorthCore

/// The response header lines curl hands over, read on their bytes
/// (HTTPHeaderLine): whatever a server sends gives a value, never a trap.
/// Pure, no server.
final class HTTPHeaderLineTests: XCTestCase {
    private func parse(_ bytes: [UInt8]) -> HTTPHeaderLine {
        bytes.withUnsafeBytes { HTTPHeaderLine.parse($0) }
    }

    private func parse(_ text: String) -> HTTPHeaderLine { parse(Array(text.utf8)) }

    /// Records `lines` as one response's header block.
    private func record(_ lines: [String], status start: Int = 0) -> (headers: [(name: String, value: String)], status: Int) {
        var headers: [(name: String, value: String)] = []
        var status = start
        for line in lines {
            Array(line.utf8).withUnsafeBytes { HTTPHeaderLine.record($0, into: &headers, status: &status) }
        }
        return (headers, status)
    }

    func testStatusLines() {
        XCTAssertEqual(parse("HTTP/1.1 200 OK\r\n"), .status(200))
        XCTAssertEqual(parse("HTTP/2 204 \r\n"), .status(204))
        XCTAssertEqual(parse("HTTP/1.1 304\r\n"), .status(304), "no reason phrase")
        XCTAssertEqual(parse("HTTP/1.1 503"), .status(503), "no CRLF")
        XCTAssertEqual(parse("HTTP/1.1   429  Too Many\r\n"), .status(429), "several spaces")
        XCTAssertEqual(parse("HTTP/1.1 20\r\n"), .status(nil))
        XCTAssertEqual(parse("HTTP/1.1 2000 OK\r\n"), .status(nil))
        XCTAssertEqual(parse("HTTP/1.1 2x0 OK\r\n"), .status(nil))
        XCTAssertEqual(parse("HTTP/1.1\r\n"), .status(nil))
        XCTAssertEqual(parse("HTTP/"), .status(nil))
        XCTAssertEqual(parse("http/1.1 200 OK\r\n"), .ignored, "no colon, not a status line")
    }

    func testFieldsAreTrimmedAroundTheirValue() {
        XCTAssertEqual(parse("ETag: \"v1\"\r\n"), .field(name: "ETag", value: "\"v1\""))
        XCTAssertEqual(parse("Retry-After:3\r\n"), .field(name: "Retry-After", value: "3"))
        XCTAssertEqual(parse("X: \t  a b \t \r\n"), .field(name: "X", value: "a b"))
        XCTAssertEqual(parse("X:\r\n"), .field(name: "X", value: ""), "empty value")
        XCTAssertEqual(parse("X:   \r\n"), .field(name: "X", value: ""))
        XCTAssertEqual(parse("X:"), .field(name: "X", value: ""))
        XCTAssertEqual(parse("X: a:b: c\r\n"), .field(name: "X", value: "a:b: c"), "the first colon splits")
        XCTAssertEqual(parse("Name : v\r\n"), .field(name: "Name ", value: "v"), "the name as sent")
    }

    func testCRWithoutLFStaysInsideTheValue() {
        XCTAssertEqual(parse("ETag: \"a\rb\"\r\n"), .field(name: "ETag", value: "\"a\rb\""))
        XCTAssertEqual(parse("ETag: \"a\"\r"), .field(name: "ETag", value: "\"a\""))
        XCTAssertNil(EntityTag.validated("\"a\rb\""), "such an ETag is then refused")
    }

    func testLinesThatAreNoFieldAreIgnored() {
        XCTAssertEqual(parse("\r\n"), .ignored, "the blank line that ends the block")
        XCTAssertEqual(parse("\n"), .ignored)
        XCTAssertEqual(parse("no colon here\r\n"), .ignored)
        XCTAssertEqual(parse(": empty name\r\n"), .ignored)
        XCTAssertEqual(parse([UInt8]()), .ignored)
        let long = "X: " + String(repeating: "a", count: HTTPHeaderLine.maxLineBytes) + "\r\n"
        XCTAssertEqual(parse(long), .ignored, "longer than maxLineBytes")
        let fits = "X: " + String(repeating: "a", count: HTTPHeaderLine.maxLineBytes - 5) + "\r\n"
        XCTAssertEqual(parse(fits), .field(name: "X", value: String(repeating: "a", count: HTTPHeaderLine.maxLineBytes - 5)))
    }

    func testNonUTF8BytesAreRepairedNotTrapped() {
        XCTAssertEqual(parse([0x58, 0x3A, 0x20, 0xFF, 0xC3, 0x0D, 0x0A]), .field(name: "X", value: "\u{FFFD}\u{FFFD}"))
        XCTAssertEqual(parse([0xC3, 0xA9, 0x3A, 0x61]), .field(name: "é", value: "a"))
        XCTAssertEqual(parse([0x00, 0x3A, 0x00]), .field(name: "\0", value: "\0"))
        // A combining mark after the colon: bytes, not graphemes, decide.
        XCTAssertEqual(parse("X:\u{301}v\r\n"), .field(name: "X", value: "\u{301}v"))
    }

    func testObsFoldContinuesTheFieldBefore() {
        let folded = record(["HTTP/1.1 200 OK\r\n", "X-Long: one\r\n", "  two\r\n", "\tthree: 3\r\n", "Y: y\r\n"])
        XCTAssertEqual(folded.headers.map(\.name), ["X-Long", "Y"])
        XCTAssertEqual(folded.headers.first?.value, "one two three: 3")
        let first = record(["HTTP/1.1 200 OK\r\n", "  orphan\r\n", "X:\r\n", " later\r\n"])
        XCTAssertEqual(first.headers.map(\.name), ["X"], "a fold with nothing before it is ignored")
        XCTAssertEqual(first.headers.first?.value, "later")
        XCTAssertEqual(parse(" \t \r\n"), .ignored, "a blank fold adds nothing")
    }

    func testAStatusLineStartsOverAndDuplicatesAreKeptInOrder() {
        let result = record(["HTTP/1.1 100 Continue\r\n", "X: old\r\n", "\r\n",
                             "HTTP/1.1 503 Busy\r\n", "Retry-After: 7\r\n", "retry-after: 9\r\n", "\r\n"])
        XCTAssertEqual(result.status, 503)
        XCTAssertEqual(result.headers.map(\.name), ["Retry-After", "retry-after"])
        let response = HTTPResponse(status: result.status, headers: result.headers, body: [])
        XCTAssertEqual(response.header("RETRY-AFTER"), "7", "the first of duplicates, any case")
        XCTAssertFalse(response.headers.contains { $0.name == "X" }, "the 100's fields are gone")
        XCTAssertEqual(record(["HTTP/1.1 2x0\r\n"], status: 200).status, 200, "an unreadable status keeps the last")
    }

    func testNamesCompareIgnoringASCIICaseOnly() {
        XCTAssertTrue(HTTPResponse.sameName("ETag", "etag"))
        XCTAssertTrue(HTTPResponse.sameName("Retry-After", "rETRY-aFTER"))
        XCTAssertFalse(HTTPResponse.sameName("ETag", "ETa"))
        XCTAssertFalse(HTTPResponse.sameName("a@", "a`"), "@ and ` differ by 0x20 but are no letters")
        XCTAssertFalse(HTTPResponse.sameName("x[", "x{"))
        XCTAssertFalse(HTTPResponse.sameName("é", "É"), "non-ASCII is compared as it is")
    }

    func testFieldsAndFoldedValuesAreBounded() {
        var lines = ["HTTP/1.1 200 OK\r\n"]
        for i in 0..<(HTTPHeaderLine.maxFields + 50) { lines.append("X-\(i): v\r\n") }
        XCTAssertEqual(record(lines).headers.count, HTTPHeaderLine.maxFields)
        let chunk = " " + String(repeating: "b", count: 1000) + "\r\n"
        let folded = record(["X: a\r\n"] + Array(repeating: chunk, count: 100))
        XCTAssertLessThanOrEqual(folded.headers[0].value.utf8.count, HTTPHeaderLine.maxLineBytes)
        XCTAssertGreaterThan(folded.headers[0].value.utf8.count, HTTPHeaderLine.maxLineBytes - 1100)
    }

    /// Random bytes, biased towards the ones the parser looks at.
    func testRandomLinesNeverTrap() {
        var generator = SeededGenerator("testRandomLinesNeverTrap")
        let alphabet: [UInt8] = Array("HTP/1. 20:\t\r\naZ".utf8) + [0x00, 0x80, 0xC3, 0xFF, 0xE2]
        var headers: [(name: String, value: String)] = []
        var status = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...40, using: &generator)
            var line = (0..<count).map { _ in alphabet.randomElement(using: &generator)! }
            if Bool.random(using: &generator) { line.insert(contentsOf: Array("HTTP/".utf8), at: 0) }
            line.withUnsafeBytes { HTTPHeaderLine.record($0, into: &headers, status: &status) }
            XCTAssertLessThanOrEqual(headers.count, HTTPHeaderLine.maxFields)
            XCTAssertTrue(status == 0 || (0...999).contains(status))
        }
        for (name, value) in headers {
            XCTAssertFalse(name.isEmpty)
            XCTAssertFalse(value.utf8.first.map { $0 == 0x20 || $0 == 0x09 } ?? false)
            XCTAssertFalse(value.utf8.last.map { $0 == 0x0A || $0 == 0x0D } ?? false)
        }
    }
}
