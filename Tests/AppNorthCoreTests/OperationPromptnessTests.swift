import XCTest
@testable import AppNorthCore

/// An operation ends promptly whatever its server does (#41 item 2): its
/// timeout counts from its start, not from when a worker took it; its
/// cancel ends it whatever holds the workers. Against the real dev server,
/// whose delay faults hold a request until `TestServer.release()` (or the
/// reset of the next test). Causal: every check is an order of events,
/// never a wall-clock bound.
final class OperationPromptnessTests: XCTestCase {
    override func setUp() async throws {
        try TestServer.reset()
    }

    override func tearDown() async throws {
        try TestServer.release()
    }

    /// Completions in the order they came.
    final class Arrivals: @unchecked Sendable {
        private let condition = Lock<Void>((), level: LockClass.test)
        private var order: [String] = []
        private var results: [String: Result<String, AppNorthError>] = [:]
        private var at: [String: UInt64] = [:]

        func put(_ name: String, _ result: Result<String, AppNorthError>) {
            let now = monotonicNow()
            condition.locked {
                order.append(name)
                at[name] = now
                results[name] = result
                condition.broadcast()
            }
        }

        func wait(for names: Set<String>, seconds: Int = 30)
            -> (order: [String], results: [String: Result<String, AppNorthError>], at: [String: UInt64]) {
            condition.locked {
                condition.wait(until: { names.isSubset(of: Set(order)) }, deadline: Deadline.fromNow(milliseconds: seconds * 1000))
                return (order, results, at)
            }
        }
    }

    /// A gate a worker job waits at until the test opens it.
    final class Gate: @unchecked Sendable {
        private let condition = Lock<Void>((), level: LockClass.test)
        private var open = false
        private var waiting = 0

        func pass() {
            condition.locked {
                waiting += 1
                condition.broadcast()
                condition.wait(until: { open }, deadline: nil)
            }
        }

        func waitUntilWaiting(_ count: Int) {
            condition.locked { condition.wait(until: { waiting >= count }, deadline: nil) }
        }

        func openUp() {
            condition.locked {
                open = true
                condition.broadcast()
            }
        }
    }

    private func hold(_ path: String) throws {
        _ = try TestServer.post("/admin/faults", #"{"delay_ms":600000,"count":1,"path_prefix":"/v1/apps/swift\#(path)"}"#)
    }

    /// Waits until the fault on `path` was taken (a request is held there).
    private func waitUntilTaken(_ path: String) throws {
        func pending() throws -> Bool {
            try TestServer.get("/admin/faults")["faults"]?.arrayElements.contains {
                $0["path_prefix"]?.stringValue == "/v1/apps/swift" + path
            } ?? false
        }
        while try pending() { usleep(5000) }
    }

    private static func asError(_ result: Result<String, any Error>) -> Result<String, AppNorthError> {
        result.mapError { $0 as? AppNorthError ?? .internal("\($0)") }
    }

    /// X (client A, 1.5 s) waits for a worker: A's two are taken by jobs
    /// held at a gate. Y (client B, 1 s), started just after X, is held at
    /// the server; its timeout opens the gate, so a worker takes X at least
    /// 1 s after X began, and X's request is held too. Z (client B, 1 s)
    /// starts once X's request is held. Counted from its start, X's
    /// timeout comes at most 0.5 s after it was taken, before Z's, which
    /// comes 1 s after; a fresh 1.5 s from the take would end X after Z.
    func testATimeoutCountsFromTheOperationsStart() throws {
        let a = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 1500))
        let b = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 1000))
        let table = OperationTable()
        let gate = Gate()
        let arrivals = Arrivals()
        for index in 0..<OperationWorkers.perClient {
            try table.begin(owners: [a]).runOnWorker(share: a, transport: a.transport, timeoutMilliseconds: 0, { gate.pass(); return "" }) {
                arrivals.put("blocker\(index)", Self.asError($0))
            }
        }
        gate.waitUntilWaiting(OperationWorkers.perClient)
        try hold("/boards")
        try hold("/ideas/y/comments")
        try hold("/ideas/z/comments")
        let x = try table.begin(owners: [a])
        let began = monotonicNow()
        try x.runOnWorker(share: a, transport: a.transport, timeoutMilliseconds: 1500, { try a.perform(.listBoards) }) {
            arrivals.put("x", Self.asError($0))
        }
        try b.start(.listComments(ideaID: "y"), operation: CancellationToken()) { result in
            gate.openUp()
            arrivals.put("y", result)
        }
        try waitUntilTaken("/boards")  // a worker took X: its request is held
        let taken = monotonicNow()
        try b.start(.listComments(ideaID: "z"), operation: CancellationToken()) { arrivals.put("z", $0) }
        let (order, results, at) = arrivals.wait(for: ["x", "y", "z"])
        let ended = at["x"] ?? began
        print("timeout from start: X waited \((taken - began) / 1_000_000) ms for a worker, ended "
              + "\((ended - began) / 1_000_000) ms after its start; order \(order)")
        // A request's timeout is a network error ("Timeout was reached").
        guard case .failure = results["x"] else { return XCTFail("X: \(String(describing: results["x"]))") }
        guard case .failure = results["z"] else { return XCTFail("Z: \(String(describing: results["z"]))") }
        XCTAssertLessThan(order.firstIndex(of: "x")!, order.firstIndex(of: "z")!,
                          "X's timeout counts from its start: it ends before Z, started after a worker took X")
    }

    /// A job still waiting for a worker at its deadline ends with
    /// `.timeout` on the engine's thread, while its client's workers are
    /// still held; its work never runs.
    func testAJobStillWaitingForAWorkerAtItsDeadlineTimesOut() throws {
        let a = try TestServer.client()
        let table = OperationTable()
        let gate = Gate()
        let arrivals = Arrivals()
        defer { gate.openUp() }
        for index in 0..<OperationWorkers.perClient {
            try table.begin(owners: [a]).runOnWorker(share: a, transport: a.transport, timeoutMilliseconds: 0,
                                                     { gate.pass(); return "" }) { arrivals.put("blocker\(index)", Self.asError($0)) }
        }
        gate.waitUntilWaiting(OperationWorkers.perClient)
        try table.begin(owners: [a]).runOnWorker(share: a, transport: a.transport, timeoutMilliseconds: 300,
                                                 { "ran" }) { arrivals.put("x", Self.asError($0)) }
        let (order, results, _) = arrivals.wait(for: ["x"])
        guard case .failure(.timeout) = results["x"] else { return XCTFail("x: \(String(describing: results["x"]))") }
        XCTAssertEqual(order, ["x"], "it ended while the blockers still held the workers")
    }
}
