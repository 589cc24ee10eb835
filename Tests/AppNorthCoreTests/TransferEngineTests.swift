import Glibc
import XCTest
@testable import AppNorthCore

/// The transfer thread's turn-taking: at most `maxHostConnections`
/// transfers per origin in curl's hands, the rest waiting in the engine's
/// own queue (`AdmissionQueue`), where a cancel or a total timeout still
/// ends them. The queue's rules on their own, then the engine against the
/// real server.
final class TransferEngineTests: XCTestCase {
    func testTheQueueAdmitsAFewPerOriginInOrderAndHandsPlacesOver() {
        var queue = AdmissionQueue<Int>(perOrigin: 2)
        XCTAssertEqual(queue.arrive(1, origin: "http://a"), 1)
        XCTAssertEqual(queue.arrive(2, origin: "http://a"), 2)
        XCTAssertNil(queue.arrive(3, origin: "http://a"), "the third waits")
        XCTAssertNil(queue.arrive(4, origin: "http://a"))
        XCTAssertEqual(queue.arrive(5, origin: "http://b"), 5, "another origin has places of its own")
        XCTAssertEqual(queue.waitingCount, 2)
        XCTAssertEqual(queue.leave(origin: "http://a"), 3, "the first to wait takes the freed place")
        XCTAssertEqual(queue.running(origin: "http://a"), 2)
        XCTAssertEqual(queue.leave(origin: "http://a"), 4)
        XCTAssertNil(queue.leave(origin: "http://a"))
        XCTAssertNil(queue.leave(origin: "http://a"))
        XCTAssertEqual(queue.running(origin: "http://a"), 0)
        XCTAssertTrue(queue.isEmpty)
        XCTAssertEqual(queue.arrive(6, origin: "http://a"), 6)
    }

    func testWaitingJobsCanBeTakenOutWithoutHoldingAPlace() {
        var queue = AdmissionQueue<Int>(perOrigin: 1)
        XCTAssertEqual(queue.arrive(1, origin: "o"), 1)
        for job in 2...5 { XCTAssertNil(queue.arrive(job, origin: "o")) }
        XCTAssertEqual(queue.removeWaiting(where: { $0 % 2 == 0 }), [2, 4])
        XCTAssertEqual(queue.waitingCount, 2)
        XCTAssertEqual(queue.leave(origin: "o"), 3, "order is kept")
        XCTAssertEqual(queue.leave(origin: "o"), 5)
        XCTAssertNil(queue.leave(origin: "o"))
        XCTAssertEqual(AdmissionQueue<Int>(perOrigin: 0).perOrigin, 1, "a place at least")
    }

    func testTheOriginIsTheURLUpToItsPath() {
        XCTAssertEqual(EasyTransfer.origin(of: "http://127.0.0.1:8080/v1/apps/x?y=1"), "http://127.0.0.1:8080")
        XCTAssertEqual(EasyTransfer.origin(of: "https://h.example?q"), "https://h.example")
        XCTAssertEqual(EasyTransfer.origin(of: "https://h.example"), "https://h.example")
        XCTAssertEqual(EasyTransfer.origin(of: "no-scheme/x"), "no-scheme")
        XCTAssertEqual(EasyTransfer.origin(of: ""), "")
    }

    /// Eight reads the server holds take every place of the origin; a
    /// ninth waits in the engine's queue, where a cancel still ends it at once.
    func testAReadWaitingForAPlaceEndsAtOnceWhenCancelled() throws {
        try TestServer.reset()
        let holder = try holdEveryPlace()
        defer { holder.client.cancelInFlight() }
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000))
        let waiting = CancellationToken()
        let results = AsyncOperationTests.Results()
        try client.start(.listBoards, operation: waiting) { results.put(0, $0) }
        waiting.cancel()
        let done = results.wait(for: 1)
        guard case .failure(.cancelled) = done[0] else { return XCTFail("waiting: \(String(describing: done[0]))") }
        XCTAssertTrue(holder.results.wait(for: 1, seconds: 0).isEmpty, "the held reads are still in flight")
    }

    /// A total timeout counts from the start call, not from the moment a
    /// place freed: the waiting read times out while the eight are still held.
    func testAReadWaitingForAPlaceTimesOutOnItsOwnClock() throws {
        try TestServer.reset()
        let holder = try holdEveryPlace()
        defer { holder.client.cancelInFlight() }
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 300))
        let results = AsyncOperationTests.Results()
        try client.start(.listBoards, operation: CancellationToken()) { results.put(0, $0) }
        let done = results.wait(for: 1)
        guard case .failure(.network(let message)) = done[0] else {
            return XCTFail("waiting: \(String(describing: done[0]))")
        }
        XCTAssertTrue(message.lowercased().contains("timeout"), message)
        XCTAssertTrue(holder.results.wait(for: 1, seconds: 0).isEmpty, "the held reads are still in flight")
    }

    /// Starts come from several threads at once while curl finishes others
    /// (a start on a warm origin sends its request on the caller's thread,
    /// under the engine's lock): every read completes once, and every
    /// completion runs on the one engine thread, never on a starter.
    func testStartsFromSeveralThreadsCompleteOnceEachOnTheEngineThread() throws {
        try TestServer.reset()
        _ = try TestServer.board("swift", "Features")
        let client = try TestServer.client()
        let results = AsyncOperationTests.Results()
        let threads = Lock<(starters: Set<UInt>, completers: Set<UInt>)>(([], []), level: LockClass.test)
        let starters = 4, each = 40
        let started = Lock<Void>((), level: LockClass.test)
        nonisolated(unsafe) var failures: [String] = []
        var workers: [pthread_t] = []
        for t in 0..<starters {
            var thread = pthread_t()
            let body: @Sendable () -> Void = {
                threads.withLock { _ = $0.starters.insert(UInt(pthread_self())) }
                for i in 0..<each {
                    let index = t * each + i
                    do {
                        try client.start(.listBoards, operation: CancellationToken()) { result in
                            threads.withLock { _ = $0.completers.insert(UInt(pthread_self())) }
                            results.put(index, result)
                        }
                    } catch { started.locked { failures.append("start \(index): \(error)") } }
                }
            }
            let box = Unmanaged.passRetained(Box(body)).toOpaque()
            XCTAssertEqual(pthread_create(&thread, nil, { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box), 0)
            workers.append(thread)
        }
        for thread in workers { pthread_join(thread, nil) }
        XCTAssertEqual(started.locked { failures }, [])
        let done = results.wait(for: starters * each, seconds: 30)
        XCTAssertEqual(done.count, starters * each)
        for (index, result) in done {
            guard case .success(let json) = result else { return XCTFail("read \(index): \(result)") }
            XCTAssertTrue(json.contains("Features"), json)
        }
        let seen = threads.withLock { $0 }
        XCTAssertEqual(seen.completers.count, 1, "completions ran on \(seen.completers.count) threads")
        XCTAssertTrue(seen.completers.isDisjoint(with: seen.starters), "a completion ran on a starter thread")
    }

    /// An `EngineWait` holds no thread: it ends once, on the engine thread,
    /// when reached, at its deadline, or at a cancel of its operation or of
    /// its client; a reach after it ended changes nothing.
    func testEngineWaitsEndOnceOnTheEngineThreadEachWay() throws {
        let engine = try TransferEngine.shared()
        let client = try TestServer.client()
        let ends = Lock<[Int: (EngineWait.End, UInt)]>([:], level: LockClass.test)
        let other = try TestServer.client()  // its cancelInFlight() is not called
        func wait(_ index: Int, _ timeoutMs: Int, _ operation: CancellationToken = CancellationToken(),
                  on owner: AppNorthClient? = nil) -> EngineWait {
            EngineWait(timeoutMilliseconds: timeoutMs,
                       cancellation: Cancellation(operation: operation, transport: (owner ?? client).transport)) { how in
                ends.withLock {
                    $0[index] = ($0[index] == nil ? (how, UInt(pthread_self())) : (how, 0))
                    ends.broadcast()
                }
            }
        }
        let reached = wait(0, 60_000, on: other), timed = wait(1, 50, on: other), byOperation = CancellationToken()
        let cancelled = wait(2, 60_000, byOperation), byClient = wait(3, 60_000)
        for w in [reached, timed, cancelled, byClient] { try engine.watch(w) }
        engine.reach(reached)
        byOperation.cancel()
        client.cancelInFlight()
        ends.withLock { seen in
            ends.wait(until: { seen.count == 4 }, deadline: Deadline.fromNow(milliseconds: 15_000))
        }
        engine.reach(reached)
        engine.reach(timed)
        let seen = ends.withLock { $0 }
        XCTAssertEqual(seen[0]?.0, .reached)
        XCTAssertEqual(seen[1]?.0, .timedOut)
        XCTAssertEqual(seen[2]?.0, .cancelled(.operation))
        XCTAssertEqual(seen[3]?.0, .cancelled(.client))
        let threads = Set(seen.values.map(\.1))
        XCTAssertEqual(threads.count, 1, "each ended once, all on one thread: \(seen)")
        XCTAssertFalse(threads.contains(UInt(pthread_self())) || threads.contains(0))
    }

    /// `whenReached` runs its action at once when the value is reached
    /// already, otherwise once, on the thread that moves the value there.
    func testGenerationWaiterRunsActionsWhenReached() {
        let waiter = GenerationWaiter()
        let ran = Lock<[String]>([], level: LockClass.test)
        waiter.whenReached(2) { ran.withLock { $0.append("two") } }
        waiter.whenReached(1) { ran.withLock { $0.append("one") } }
        waiter.advance(to: 1)
        XCTAssertEqual(ran.withLock { $0 }, ["one"])
        waiter.advance(to: 5)
        waiter.advance(to: 6)
        XCTAssertEqual(ran.withLock { $0 }, ["one", "two"])
        waiter.whenReached(3) { ran.withLock { $0.append("three, at once") } }
        XCTAssertEqual(ran.withLock { $0 }.last, "three, at once")
    }

    private final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts `maxHostConnections` reads that the server holds for 60 s,
    /// and returns once the server has all of them.
    private func holdEveryPlace() throws -> (client: AppNorthClient, results: AsyncOperationTests.Results) {
        let places = TransferEngine.maxHostConnections
        _ = try TestServer.post("/admin/faults",
                                #"{"delay_ms":60000,"count":\#(places),"path_prefix":"/v1/apps/swift/ideas/held/comments"}"#)
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 120_000))
        let results = AsyncOperationTests.Results()
        for index in 0..<places {
            try client.start(.listComments(ideaID: "held"), operation: CancellationToken()) { results.put(index, $0) }
        }
        // The fault is used up once the server holds all of them.
        let deadline = ContinuousClock.now + .seconds(15)
        while try (TestServer.get("/admin/faults")["faults"]?.count ?? 0) > 0 && ContinuousClock.now < deadline {
            usleep(5_000)
        }
        return (client, results)
    }
}
