import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest

/// The local API server ($APPNORTH_TEST_SERVER, set by
/// scripts/with-devserver.sh) and the admin endpoints the AppDNA tests use.
/// Plain URLSession, so that these tests depend on nothing inside the core.
enum AppDNADevServer {
    static func url() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["APPNORTH_TEST_SERVER"] else {
            throw XCTSkip("APPNORTH_TEST_SERVER is not set: run through `make test-swift`")
        }
        return url
    }

    /// Sends an admin request and waits for it (10 s at most); returns the
    /// JSON object answered.
    @discardableResult
    static func request(_ method: String, _ path: String, _ body: String? = nil) throws -> [String: Any] {
        guard let url = URL(string: try url() + path) else { throw URLError(.badURL) }
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let reply = Reply()
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, response, error in
            reply.set(data, (response as? HTTPURLResponse)?.statusCode, error)
            done.signal()
        }.resume()
        guard done.wait(timeout: .now() + 15) == .success else { throw URLError(.timedOut) }
        let (data, status, error) = reply.get()
        if let error { throw error }
        XCTAssertTrue((200...299).contains(status ?? 0), "admin \(method) \(path) -> \(status ?? 0)")
        return (data.flatMap { try? JSONSerialization.jsonObject(with: $0) }) as? [String: Any] ?? [:]
    }

    /// One admin answer, handed from URLSession's queue to the test.
    final class Reply: @unchecked Sendable {
        private let lock = NSLock()
        private var value: (Data?, Int?, (any Error)?) = (nil, nil, nil)

        func set(_ data: Data?, _ status: Int?, _ error: (any Error)?) { lock.withLock { value = (data, status, error) } }
        func get() -> (Data?, Int?, (any Error)?) { lock.withLock { value } }
    }

    static func reset() throws { try request("POST", "/admin/reset", "{}") }

    /// Publishes a config for `app`; live streams get it at once.
    static func publish(_ app: String, _ configJSON: String) throws {
        try request("POST", "/admin/apps/\(app)/config", #"{"config":\#(configJSON)}"#)
    }

    /// The names of the events the server stored for `app`, in arrival order.
    static func eventNames(_ app: String) throws -> [String] {
        let events = try request("GET", "/admin/apps/\(app)/state")["events"] as? [[String: Any]] ?? []
        return events.compactMap { $0["name"] as? String }
    }

    /// How many injected faults are still waiting for a request.
    static func faultsLeft() throws -> Int {
        (try request("GET", "/admin/faults")["faults"] as? [Any])?.count ?? 0
    }
}

/// A fresh folder for one test's data directories.
func temporaryDirectory(_ name: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("appdna-\(name)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Runs the main run loop (which serves the main queue, where `queue: .main`
/// observers run) until `condition` holds or `timeout` seconds pass. Only on
/// the main thread.
func spinMainRunLoop(until condition: () -> Bool, timeout: TimeInterval = 60) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        _ = RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.02))
    }
    return true
}

/// Runs async `body` from a synchronous test on the main thread, serving the
/// main run loop meanwhile.
func runOnMainRunLoop(timeout: TimeInterval = 60, _ body: @escaping @Sendable () async throws -> Void) throws {
    let outcome = OutcomeBox()
    Task.detached {
        do { try await body(); outcome.set(nil) } catch { outcome.set(error) }
    }
    XCTAssertTrue(spinMainRunLoop(until: { outcome.done }, timeout: timeout), "async work did not finish in \(timeout) s")
    if let error = outcome.error { throw error }
}

final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var finished = false
    private var failure: (any Error)?

    func set(_ error: (any Error)?) { lock.withLock { finished = true; failure = error } }
    var done: Bool { lock.withLock { finished } }
    var error: (any Error)? { lock.withLock { failure } }
}
