import TestServerClaim
import XCTest
@testable import AppNorthCore

/// The local API server the tests run against ($APPNORTH_TEST_SERVER, set by
/// scripts/with-devserver.sh), and its admin endpoints.
enum TestServer {
    static func url() throws -> String {
        guard let url = claimedTestServer else {
            throw XCTSkip("APPNORTH_TEST_SERVER is not set: run through `make test-swift`")
        }
        return url
    }

    static let admin = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 10_000))

    @discardableResult
    static func post(_ path: String, _ body: String = "{}") throws -> JSON {
        let response = try admin.perform(HTTPRequest(method: .post, url: try url() + path,
                                                     headers: [("Content-Type", "application/json")],
                                                     body: Array(body.utf8)))
        XCTAssertTrue(response.isSuccess, "admin POST \(path) -> \(response.status)")
        return try JSON.parse(response.body)
    }

    static func get(_ path: String) throws -> JSON {
        let response = try admin.perform(HTTPRequest(method: .get, url: try url() + path))
        XCTAssertTrue(response.isSuccess, "admin GET \(path) -> \(response.status)")
        if let parsed = try? JSON.parse(response.body) { return parsed }
        // Stored events may hold integers beyond 64 bits: read those as
        // reals (0x8 is JSON_DECODE_INT_AS_REAL).
        return try response.body.withUnsafeBytes { try JSON.parse($0, flags: 0x8) }
    }

    static func delete(_ path: String) throws {
        let response = try admin.perform(HTTPRequest(method: .delete, url: try url() + path))
        XCTAssertTrue(response.isSuccess, "admin DELETE \(path) -> \(response.status)")
    }

    static func reset() throws { try post("/admin/reset") }

    /// How many requests wait out a delay fault now (a long `delay_ms`
    /// holds a request until `release()` or the next reset).
    static func held() throws -> Int { Int(try get("/admin/faults")["held"]?.intValue ?? 0) }

    /// Ends every delay in progress: the held requests go on.
    static func release() throws { try post("/admin/faults/release") }

    /// Runs `body` while the server drops every API connection without an
    /// answer: a real network failure, on the real server's URL (so account
    /// scopes still match after "reconnecting").
    static func offline<T>(_ body: () throws -> T) throws -> T {
        try post("/admin/faults", #"{"drop":true,"count":1000}"#)
        defer { try? delete("/admin/faults") }
        return try body()
    }

    /// Creates a board; returns its id.
    static func board(_ app: String, _ name: String) throws -> String {
        let reply = try post("/admin/apps/\(app)/boards", #"{"name":"\#(name)","description":"d"}"#)
        return (reply["board"] ?? reply)["id"]?.stringValue ?? ""
    }

    static func idea(_ app: String, board: String, title: String, status: String = "open") throws {
        try post("/admin/apps/\(app)/ideas",
                 #"{"board_id":"\#(board)","title":"\#(title)","body":"b","status":"\#(status)"}"#)
    }

    static func client(app: String = "swift", credential: AppNorthCredential? = nil,
                       timeouts: HTTPTimeouts = HTTPTimeouts(apiRequestMilliseconds: 3000)) throws -> AppNorthClient {
        AppNorthClient(configuration: try AppNorthClientConfiguration(
            apiURL: try url(), appID: app, credential: credential, timeouts: timeouts))
    }
}

func getenvString(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
