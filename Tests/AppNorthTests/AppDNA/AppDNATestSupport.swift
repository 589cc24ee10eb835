import AppNorth
import Foundation
import XCTest

/// The dev server's admin endpoints the AppDNA tests use, beside the
/// shared ones in TestServer.swift.
extension TestServer {
    /// Publishes a config for `app`; live streams get it at once.
    static func publish(_ app: String, _ configJSON: String) throws {
        try post("/admin/apps/\(app)/config", #"{"config":\#(configJSON)}"#)
    }

    /// The events the server stored for `app`, in arrival order.
    static func events(_ app: String) throws -> [[String: Any]] {
        try get("/admin/apps/\(app)/state")["events"] as? [[String: Any]] ?? []
    }

    /// Their names.
    static func eventNames(_ app: String) throws -> [String] {
        try events(app).compactMap { $0["name"] as? String }
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
