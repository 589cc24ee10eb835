import AppNorth
import AppNorthCore
import Foundation
import TestServerClaim
import XCTest

/// The local API server these tests run against ($APPNORTH_TEST_SERVER, set
/// by scripts/with-devserver.sh, which `make test-swift` uses), reached
/// through its admin endpoints.
enum TestServer {
    static func url() throws -> String {
        guard let url = claimedTestServer else {
            throw XCTSkip("APPNORTH_TEST_SERVER is not set: run through `make test-swift`")
        }
        return url
    }

    private static let admin = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 10_000))

    private static func request(_ method: HTTPRequest.Method, _ path: String, _ body: String? = nil) throws -> [String: Any] {
        let response = try admin.perform(HTTPRequest(method: method, url: try url() + path,
                                                     headers: body == nil ? [] : [("Content-Type", "application/json")],
                                                     body: body.map { Array($0.utf8) }))
        XCTAssertTrue(response.isSuccess, "admin \(method.rawValue) \(path) -> \(response.status)")
        guard !response.body.isEmpty else { return [:] }
        return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }

    @discardableResult
    static func post(_ path: String, _ body: String = "{}") throws -> [String: Any] {
        try request(.post, path, body)
    }

    static func get(_ path: String) throws -> [String: Any] {
        try request(.get, path)
    }

    static func delete(_ path: String) throws {
        _ = try request(.delete, path)
    }

    static func reset() throws { try post("/admin/reset") }

    /// Every API connection is dropped without an answer (a real network
    /// failure on the real server's URL, so account scopes still match
    /// after "reconnecting") until `online()`.
    static func offline() throws { try post("/admin/faults", #"{"drop":true,"count":1000}"#) }
    static func online() throws { try delete("/admin/faults") }

    /// The server holds the next `count` requests under `pathPrefix` until
    /// the next reset (10 min at most), then drops them unanswered: a held
    /// write never lands later, in another test's state.
    static func hold(_ pathPrefix: String, count: Int = 1) throws {
        try post("/admin/faults", #"{"delay_ms":600000,"drop":true,"count":\#(count),"path_prefix":"\#(pathPrefix)"}"#)
    }

    /// How many requests the server holds now.
    static func held() throws -> Int { (try get("/admin/faults"))["held"] as? Int ?? 0 }

    /// Waits (generously, for a loaded machine) until the server has taken
    /// every armed fault: a held request is then in flight.
    static func waitUntilFaultsTaken() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if ((try get("/admin/faults"))["faults"] as? [Any])?.isEmpty ?? true { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("the server never took the armed fault")
    }

    @discardableResult
    static func board(_ app: String, _ name: String) throws -> String {
        let reply = try post("/admin/apps/\(app)/boards", #"{"name":"\#(name)","description":"d"}"#)
        return ((reply["board"] as? [String: Any]) ?? reply)["id"] as? String ?? ""
    }

    @discardableResult
    static func idea(_ app: String, board: String, title: String) throws -> String {
        let reply = try post("/admin/apps/\(app)/ideas", #"{"board_id":"\#(board)","title":"\#(title)","body":"b","status":"open"}"#)
        return ((reply["idea"] as? [String: Any]) ?? reply)["id"] as? String ?? ""
    }

    static func user(_ app: String, email: String, token: String) throws {
        try post("/admin/users", #"{"app":"\#(app)","email":"\#(email)","token":"\#(token)"}"#)
    }

    /// The comments the server stored for an app.
    static func comments(_ app: String) throws -> [[String: Any]] {
        (try get("/admin/apps/\(app)/state"))["comments"] as? [[String: Any]] ?? []
    }

    static func client(app: String = "swiftapi", credential: AppNorthCredential? = nil,
                       timeoutMs: Int = 5000) throws -> AppNorthClient {
        AppNorthClient(configuration: try AppNorthClientConfiguration(
            apiURL: try url(), appID: app, credential: credential,
            timeouts: HTTPTimeouts(apiRequestMilliseconds: timeoutMs)))
    }
}

/// A test against a fresh server state: app "swiftapi" with one board,
/// "Features", and one idea on it, "Dark mode". The server is back online
/// after each test.
class ServerTestCase: XCTestCase {
    var boardID = ""
    var ideaID = ""

    override func setUp() async throws {
        try TestServer.reset()
        boardID = try TestServer.board("swiftapi", "Features")
        ideaID = try TestServer.idea("swiftapi", board: boardID, title: "Dark mode")
        XCTAssertFalse(ideaID.isEmpty)
    }

    override func tearDown() async throws {
        try? TestServer.online()
    }
}
