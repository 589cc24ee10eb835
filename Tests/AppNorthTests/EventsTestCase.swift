import XCTest
import Glibc
@testable import AppNorth

/// What the event-queue tests share: a fresh server and data folder per
/// test, quiet options, and readers of what the server stored.
class EventsTestCase: XCTestCase {
    var folder = ""

    override func setUp() async throws {
        try TestServer.reset()
        folder = "/tmp/appnorth-events-\(getpid())-\(Random.hexToken(bytes: 4))"
    }

    override func tearDown() {
        _ = system("rm -rf '\(folder)'")
    }

    /// Options for tests: no timer flushes unless asked, fast retries.
    func quiet(_ change: (inout AppNorthEventsOptions) -> Void = { _ in }) -> AppNorthEventsOptions {
        var o = AppNorthEventsOptions()
        o.flushIntervalMilliseconds = 3_600_000
        o.batchThreshold = 10_000
        o.retry.baseMilliseconds = 10
        change(&o)
        return o
    }

    func open(_ options: AppNorthEventsOptions, client: AppNorthClient? = nil,
              secure: (any AppNorthSecureStore)? = nil, logger: Logger? = nil) throws -> AppNorthEvents {
        try AppNorthEvents(client: client ?? TestServer.client(), directory: DataDirectory(path: folder),
                           options: options, secureStore: secure, logger: logger)
    }

    func serverEvents() throws -> [JSON] {
        try TestServer.get("/admin/apps/swift/state")["events"]?.arrayElements ?? []
    }

    func eventPosts() throws -> Int {
        try (TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
            $0["method"]?.stringValue == "POST" && ($0["path"]?.stringValue ?? "").hasSuffix("/events")
        }.count
    }

    /// Polls until `condition` holds or 5 s pass.
    func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
        for _ in 0..<250 {
            if try condition() { return true }
            sleepMilliseconds(20)
        }
        return false
    }
}
