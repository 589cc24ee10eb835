import Foundation
import XCTest
@testable import AppNorthCore

/// The local API server ($APPNORTH_TEST_SERVER, set by
/// scripts/with-devserver.sh) and the admin endpoints the AppDNA tests use.
enum AppDNADevServer {
    static func url() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["APPNORTH_TEST_SERVER"] else {
            throw XCTSkip("APPNORTH_TEST_SERVER is not set: run through `make test-swift`")
        }
        return url
    }

    static let admin = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 10_000))

    @discardableResult
    static func request(_ method: HTTPRequest.Method, _ path: String, _ body: String? = nil) throws -> [String: Any] {
        let response = try admin.perform(HTTPRequest(method: method, url: try url() + path,
                                                     headers: body == nil ? [] : [("Content-Type", "application/json")],
                                                     body: body.map { Array($0.utf8) }))
        XCTAssertTrue(response.isSuccess, "admin \(method) \(path) -> \(response.status)")
        return (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }

    static func reset() throws { try request(.post, "/admin/reset", "{}") }

    /// Publishes a config for `app`; live streams get it at once.
    static func publish(_ app: String, _ configJSON: String) throws {
        try request(.post, "/admin/apps/\(app)/config", #"{"config":\#(configJSON)}"#)
    }

    /// The names of the events the server stored for `app`, in arrival order.
    static func eventNames(_ app: String) throws -> [String] {
        let events = try request(.get, "/admin/apps/\(app)/state")["events"] as? [[String: Any]] ?? []
        return events.compactMap { $0["name"] as? String }
    }

    /// How many injected faults are still waiting for a request.
    static func faultsLeft() throws -> Int {
        (try request(.get, "/admin/faults")["faults"] as? [Any])?.count ?? 0
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
