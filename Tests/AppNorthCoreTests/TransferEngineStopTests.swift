import CCurl
import Glibc
import XCTest
@testable import AppNorthCore

/// When the transfer engine stops (the last `SharedThreads` holder's free,
/// appnorth_shutdown), everything it holds or is being handed ends exactly
/// once, cancelled, and a hand-off after its end is refused to the caller
/// (issue #31). Each test makes an engine of its own (`TransferEngine.start`),
/// except the race against `SharedThreads`, which uses the process's.
final class TransferEngineStopTests: XCTestCase {
    typealias Gate = TransferEngineStallTests.Gate
    typealias Thread = TransferEngineStallTests.Thread

    /// How each item ended, by index: every ending is recorded, so a second
    /// one shows.
    final class Ends: @unchecked Sendable {
        private let lock = Lock<[Int: [String]]>([:], level: LockClass.test)

        func put(_ index: Int, _ how: String) {
            lock.withLock {
                $0[index, default: []].append(how)
                lock.broadcast()
            }
        }

        /// Waits until `count` items ended (or `seconds`); returns them all.
        func wait(for count: Int, seconds: Int = 10) -> [Int: [String]] {
            lock.withLock { seen in
                lock.wait(until: { seen.count >= count }, deadline: Deadline.fromNow(milliseconds: seconds * 1000))
                return seen
            }
        }
    }

    // MARK: The rule and the inbox, without threads

    typealias Left = EngineLeftovers<Int, String, String>

    func testEveryJobAndWaitHeldOrHandedInEndsOnce() {
        let left = Left(running: [1, 2], waiting: [3], watched: ["a", "b"],
                        inbox: [.arrive(4), .watch("c"), .reach("a"), .reach("gone"), .arrive(5), .watch("a"), .watch("b")],
                        key: { $0 })
        XCTAssertEqual(left.jobs, [1, 2, 3, 4, 5], "running, waiting, then handed in: each once, cancelled")
        XCTAssertEqual(left.waits.map { "\($0.wait) \($0.reached)" }, ["a true", "b false", "c false"],
                       "a reach before the stop ends its wait reached; the rest cancelled; none twice")
        let none = Left(running: [], waiting: [], watched: [], inbox: [.reach("gone")], key: { $0 })
        XCTAssertTrue(none.jobs.isEmpty && none.waits.isEmpty, "a reach for a wait that ended changes nothing")
    }

    func testTheInboxHandsItsLastItemsOverOnceThenRefuses() {
        var inbox = EngineInbox<Int, String>()
        XCTAssertTrue(inbox.pollBegins())
        XCTAssertEqual(inbox.post(.arrive(1)), .keptWake)
        XCTAssertEqual(inbox.post(.watch("w")), .keptWake)
        XCTAssertEqual(inbox.close().count, 2, "the engine's last take")
        XCTAssertEqual(inbox.post(.arrive(2)), .refused, "after it: refused to the caller")
        XCTAssertEqual(inbox.post(.reach("w")), .refused)
        XCTAssertTrue(inbox.takeAll().isEmpty && inbox.close().isEmpty, "nothing kept where no one takes it")
    }

    // MARK: Engines

    private static func job(_ index: Int, _ url: String, _ ends: Ends) throws -> TransferEngine.Job {
        let transfer = try EasyTransfer(HTTPRequest(method: .get, url: url), context: TransferContext(limit: 1 << 20, onData: nil),
                                        transport: TestServer.admin, totalTimeoutMs: 120_000, idleTimeoutMs: 0)
        return TransferEngine.Job(transfer: transfer) { code in
            do {
                _ = try transfer.finish(code)
                ends.put(index, "success")
            } catch {
                ends.put(index, error.isCancelled ? "cancelled" : "\(error)")
            }
        }
    }

    private static func wait(_ index: Int, _ ends: Ends) -> EngineWait {
        EngineWait(timeoutMilliseconds: 120_000, cancellation: Cancellation()) { how in ends.put(index, "\(how)") }
    }

    /// Reads in curl's hands (the server holds them), reads waiting for a
    /// place of their origin, and a wait with a far deadline: the stop ends
    /// every one, once, cancelled.
    func testWhatTheEngineHoldsWhenItStopsEndsOnceCancelled() throws {
        try TestServer.reset()
        let places = TransferEngine.maxHostConnections
        _ = try TestServer.post("/admin/faults",
                                #"{"delay_ms":60000,"count":\#(places),"path_prefix":"/v1/apps/swift/ideas/stop/comments"}"#)
        defer { try? TestServer.delete("/admin/faults") }
        var engine: TransferEngine? = try TransferEngine.start()
        weak let gone = engine
        let ends = Ends()
        let url = try TestServer.url() + "/v1/apps/swift/ideas/stop/comments"
        for index in 0..<(places + 2) { try engine?.add(Self.job(index, url, ends)) }
        try engine?.watch(Self.wait(100, ends))
        engine?.stop()
        engine = nil
        XCTAssertNil(gone, "nothing keeps a stopped engine (and its eventfd) alive")
        let seen = ends.wait(for: places + 3)
        XCTAssertEqual(seen.count, places + 3, "items ended after the stop: \(seen.count) of \(places + 3)")
        for (index, hows) in seen {
            XCTAssertEqual(hows, [index == 100 ? "\(EngineWait.End.cancelled(.stopped))" : "cancelled"], "item \(index)")
        }
    }

    /// The stop lands between a caller's checks and its hand-off (the
    /// engine thread has ended by then): the job and the wait are refused
    /// to the caller, which completes them itself; the engine never calls them.
    func testAHandOffAfterTheEndIsRefused() throws {
        let ends = Ends()
        let stopNow = Lock<TransferEngine?>(nil, level: LockClass.test)
        let engine = try TransferEngine.start(hooks: TransferEngine.Hooks(beforeHand: {
            stopNow.withLock { $0 }?.stop()
        }))
        stopNow.withLock { $0 = engine }
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        XCTAssertThrowsError(try engine.watch(Self.wait(0, ends)), "a wait handed after the end")
        XCTAssertThrowsError(try engine.add(Self.job(1, url, ends)), "a job handed after the end")
        XCTAssertThrowsError(try engine.add(Self.job(2, url, ends)), "and again")
        XCTAssertTrue(ends.wait(for: 1, seconds: 0).isEmpty, "the engine called none of them")
    }

    /// The stop lands while two callers hand a wait and a job in: both
    /// passed their checks before it, and hand in while the engine thread
    /// is on its way out (after its last turn, driving curl, so they go to
    /// its inbox). Both end once, cancelled.
    func testAHandOffDuringTheStopEndsCancelled() throws {
        let ends = Ends()
        let steps = Steps()
        let engine = try TransferEngine.start(hooks: TransferEngine.Hooks(beforeHand: {
            steps.bump("checked")
            steps.await("stopping", 1)  // hand in only once the engine is on its way out
        }, stopping: {
            steps.bump("stopping")
            steps.await("returned", 2)  // both callers have handed in
        }))
        let url = try TestServer.url() + "/v1/apps/swift/boards"
        let callers = [
            Thread { steps.bump("returned", ok: (try? engine.watch(Self.wait(0, ends))) != nil) },
            Thread { steps.bump("returned", ok: (try? engine.add(Self.job(1, url, ends))) != nil) },
        ]
        XCTAssertTrue(steps.await("checked", 2), "both callers passed their checks")
        engine.stop()
        for caller in callers { caller.join() }
        let seen = ends.wait(for: 2)
        XCTAssertEqual(steps.refused, 0, "neither was refused: they came before the end")
        XCTAssertEqual(seen[0], ["\(EngineWait.End.cancelled(.stopped))"], "the wait handed during the stop")
        XCTAssertEqual(seen[1], ["cancelled"], "the job handed during the stop")
    }

    /// Reads started from two threads race the last holder's drop, which
    /// retires and stops the process's engine, 200 times: every read whose
    /// start returned completes exactly once (read, or cancelled by the
    /// stop); a refused start is never called.
    func testStartsRacingTheLastDropCompleteOnceOrAreRefused() throws {
        try TestServer.reset()
        let client = try TestServer.client()
        let rounds = 200, perThread = 4
        let ends = Ends()
        let tally = Steps()
        final class Owner: Sendable {}
        for round in 0..<rounds {
            let owner = Owner()
            SharedThreads.hold(for: [owner])
            _ = try TransferEngine.shared()
            let steps = Steps()
            var threads = (0..<2).map { t in
                Thread {
                    for i in 0..<perThread {
                        let index = round * 100 + t * 10 + i
                        do {
                            try client.start(.listBoards, operation: CancellationToken()) { result in
                                switch result {
                                case .success: ends.put(index, "success")
                                case .failure(let error): ends.put(index, error.isCancelled ? "cancelled" : "\(error)")
                                }
                            }
                            tally.bump("started")
                        } catch {
                            tally.bump("refused")
                        }
                        steps.bump("start")
                    }
                }
            }
            threads.append(Thread {
                steps.await("start", 1)  // lands among the starts
                SharedThreads.drop(for: owner)
            })
            for thread in threads { thread.join() }
            // Every read started so far completes (the deadline only ends a failing run).
            guard ends.wait(for: tally.count("started")).count == tally.count("started") else { break }
        }
        let started = tally.count("started"), refused = tally.count("refused")
        let seen = ends.wait(for: started, seconds: 0)
        var outcomes: [String: Int] = [:]
        for hows in seen.values { for how in hows { outcomes[how, default: 0] += 1 } }
        print("starts racing the last drop: \(started) started, \(refused) refused, outcomes \(outcomes)")
        XCTAssertEqual(started + refused, rounds * 2 * perThread, "rounds run")
        XCTAssertEqual(seen.count, started, "started reads that completed")
        XCTAssertEqual(seen.values.filter { $0.count != 1 }.count, 0, "reads completed more than once")
        XCTAssertEqual(outcomes.filter { $0.key != "success" && $0.key != "cancelled" }, [:])
    }

    /// Named counts that test threads bump and wait for (condition, no sleeps).
    final class Steps: @unchecked Sendable {
        private let lock = Lock<(counts: [String: Int], refused: Int)>(([:], 0), level: LockClass.test)

        func bump(_ name: String, ok: Bool = true) {
            lock.withLock {
                $0.counts[name, default: 0] += 1
                if !ok { $0.refused += 1 }
                lock.broadcast()
            }
        }

        @discardableResult
        func await(_ name: String, _ count: Int, seconds: Int = 10) -> Bool {
            lock.withLock { state in
                lock.wait(until: { state.counts[name, default: 0] >= count },
                          deadline: Deadline.fromNow(milliseconds: seconds * 1000))
                return state.counts[name, default: 0] >= count
            }
        }

        var refused: Int { lock.withLock { $0.refused } }

        func count(_ name: String) -> Int { lock.withLock { $0.counts[name, default: 0] } }
    }
}

extension Error {
    var isCancelled: Bool {
        guard let error = self as? AppNorthError, case .cancelled = error else { return false }
        return true
    }
}
