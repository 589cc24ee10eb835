import Glibc
import XCTest
@testable import AppNorthCore

/// The non-blocking calls in the core: `AppNorthClient.start` on the
/// transfer thread, per-operation cancel, `OperationScope` for blocking
/// calls, the operation table and the workers. Against the real server;
/// waits are on semaphores, never sleeps for a result.
final class AsyncOperationTests: XCTestCase {
    override func setUp() async throws {
        try TestServer.reset()
    }

    /// Collects completions from library threads.
    final class Results: @unchecked Sendable {
        private let condition = Lock<Void>((), level: LockClass.test)
        private var values: [Int: Result<String, AppNorthError>] = [:]

        func put(_ index: Int, _ value: Result<String, AppNorthError>) {
            condition.locked {
                values[index] = value
                condition.broadcast()
            }
        }

        func wait(for count: Int, seconds: Int = 15) -> [Int: Result<String, AppNorthError>] {
            condition.locked {
                condition.wait(until: { values.count >= count },
                               deadline: Deadline.fromNow(milliseconds: seconds * 1000))
                return values
            }
        }
    }

    func testStartGivesWhatPerformGives() throws {
        let board = try TestServer.board("swift", "Features")
        try TestServer.idea("swift", board: board, title: "Dark mode")
        let client = try TestServer.client()
        let results = Results()
        let calls: [ClientCall] = [.listBoards, .listIdeas(IdeaQuery(limit: 5)), .listChatMessages]
        for (index, call) in calls.enumerated() {
            try client.start(call, operation: CancellationToken()) { results.put(index, $0) }
        }
        let done = results.wait(for: 3)
        for (index, call) in calls.enumerated() {
            XCTAssertEqual(try done[index]?.get(), try client.perform(call), "call \(index)")
        }
    }

    func testBadInputFailsTheStartAndCallsNothing() throws {
        let client = try TestServer.client()
        let results = Results()
        XCTAssertThrowsError(try client.start(.listComments(ideaID: ""), operation: CancellationToken()) {
            results.put(0, $0)
        })
        XCTAssertThrowsError(try client.start(.submit(.idea(boardID: "b", title: "  ", body: ""), idempotencyKey: nil),
                                              operation: CancellationToken()) { results.put(0, $0) })
        XCTAssertTrue(results.wait(for: 1, seconds: 0).isEmpty)
    }

    func testCancellingOneOperationLeavesTheOthers() throws {
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000))
        _ = try TestServer.post("/admin/faults", #"{"delay_ms":20000,"count":1,"path_prefix":"/v1/apps/swift/ideas/held/comments"}"#)
        let results = Results()
        let held = CancellationToken()
        try client.start(.listComments(ideaID: "held"), operation: held) { results.put(0, $0) }
        for index in 1...8 {
            try client.start(.listBoards, operation: CancellationToken()) { results.put(index, $0) }
        }
        let others = results.wait(for: 8)
        XCTAssertNil(others[0], "the held one is still in flight")
        held.cancel()
        let all = results.wait(for: 9)
        guard case .failure(.cancelled) = all[0] else { return XCTFail("held: \(String(describing: all[0]))") }
        for index in 1...8 { XCTAssertNoThrow(try all[index]?.get()) }
    }

    func testOperationScopeCancelsABlockingCallOnItsThreadOnly() throws {
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000))
        _ = try TestServer.post("/admin/faults", #"{"delay_ms":20000,"count":1,"path_prefix":"/v1/apps/swift/boards"}"#)
        let operation = CancellationToken()
        let results = Results()
        let thread = try BackgroundThread(name: "scoped") { _ in
            results.put(0, Result { () throws(AppNorthError) -> String in
                try OperationScope.with(operation) { () throws(AppNorthError) -> String in try client.listBoards() }
            })
        }
        // Another thread's call on the client is not touched by the cancel.
        var spec = try TestServer.get("/admin/faults")
        let deadline = ContinuousClock.now + .seconds(15)
        while (spec["faults"]?.count ?? 0) > 0 && ContinuousClock.now < deadline {
            usleep(20_000)
            spec = try TestServer.get("/admin/faults")
        }
        operation.cancel()
        XCTAssertNoThrow(try client.listChatMessages())
        let done = results.wait(for: 1)
        thread.stop()
        guard case .failure(.cancelled) = done[0] else { return XCTFail("scoped: \(String(describing: done[0]))") }
    }

    func testTheTableCountsPerOwnerAndFindsByID() throws {
        let table = OperationTable()
        let owner = NSObjectLike()
        let first = try table.begin(owners: [owner])
        let second = try table.begin(owners: [owner])
        XCTAssertNotEqual(first.id, second.id)
        XCTAssertEqual(table.count(of: owner), 2)
        XCTAssertTrue(table.cancel(id: first.id))
        XCTAssertTrue(first.isCancelled)
        XCTAssertFalse(second.isCancelled)
        table.end(first)
        XCTAssertFalse(table.cancel(id: first.id), "an ended operation is not found")
        table.cancelAll(of: owner)
        XCTAssertTrue(second.isCancelled)
        table.end(second)
        table.end(second)  // twice is harmless
        XCTAssertEqual(table.count(of: owner), 0)
        table.waitForAll(of: owner)  // returns at once
    }

    func testAWorkerJobCancelledBeforeItRunsDoesNotRun() throws {
        let table = OperationTable()
        let client = try TestServer.client()
        let operation = try table.begin(owners: [client])
        operation.cancel()
        let results = Results()
        try operation.runOnWorker(share: client, transport: client.transport, timeoutMilliseconds: 0, { "ran" }) { result in
            results.put(0, result.mapError { $0 as? AppNorthError ?? .internal("\($0)") })
        }
        guard case .failure(.cancelled) = results.wait(for: 1)[0] else { return XCTFail("the job ran") }
    }
}

private final class NSObjectLike {}
