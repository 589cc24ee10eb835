import Glibc
import Synchronization
import XCTest
@testable import AppNorthCore

/// CallbackDispatcher and dispatch-mode listener registries, driven
/// directly (no server): order, the log bound, the descriptor, close, and
/// coalesced listener deliveries.
final class DispatcherTests: XCTestCase {
    /// Collects what the jobs saw (one thread at a time, as dispatch runs them).
    final class Seen: @unchecked Sendable {
        private let lock = Lock([String](), level: LockClass.test)
        func add(_ s: String) { lock.withLock { $0.append(s) } }
        var all: [String] { lock.withLock { $0 } }
    }

    private func readable(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    func testJobsRunInOrderOnlyInsideDispatch() throws {
        let dispatcher = try CallbackDispatcher()
        let seen = Seen()
        XCTAssertFalse(dispatcher.hasPending)
        XCTAssertFalse(readable(dispatcher.descriptor))
        XCTAssertEqual(dispatcher.dispatch(), 0)
        for i in 0..<5 { XCTAssertTrue(dispatcher.post { seen.add("job \(i)") }) }
        XCTAssertEqual(seen.all, [], "nothing runs at post")
        XCTAssertTrue(dispatcher.hasPending)
        XCTAssertTrue(readable(dispatcher.descriptor))
        XCTAssertEqual(dispatcher.dispatch(max: 2), 2)
        XCTAssertTrue(readable(dispatcher.descriptor), "still readable: three wait")
        XCTAssertEqual(dispatcher.dispatch(), 3)
        XCTAssertEqual(seen.all, (0..<5).map { "job \($0)" })
        XCTAssertFalse(readable(dispatcher.descriptor), "drained: not readable")
        XCTAssertFalse(dispatcher.hasPending)
    }

    func testDispatchRunsOnlyWhatWasQueuedAtItsStart() throws {
        let dispatcher = try CallbackDispatcher()
        let seen = Seen()
        dispatcher.post {
            seen.add("first")
            dispatcher.post { seen.add("queued by first") }
            XCTAssertEqual(dispatcher.dispatch(), 0, "a nested dispatch runs nothing")
        }
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, ["first"])
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, ["first", "queued by first"])
    }

    func testLogLinesPastTheLimitAreDroppedAndCounted() throws {
        let dispatcher = try CallbackDispatcher(logLimit: 3)
        let seen = Seen()
        let logger = Logger(minimum: .debug) { level, message in seen.add("\(level.name) \(message)") }
            .routed(through: dispatcher)
        for i in 0..<10 { logger.log(.info, "line \(i)") }
        XCTAssertTrue(dispatcher.post { seen.add("completion") }, "completions are never dropped")
        XCTAssertEqual(seen.all, [])
        XCTAssertEqual(dispatcher.dispatch(), 5)
        XCTAssertEqual(Array(seen.all.prefix(4)), ["INFO line 0", "INFO line 1", "INFO line 2", "completion"])
        XCTAssertTrue(seen.all[4].hasPrefix("WARNING dispatch: 7 log line(s) dropped"), seen.all[4])
        XCTAssertFalse(dispatcher.hasPending)
        logger.log(.info, "after")
        XCTAssertEqual(dispatcher.dispatch(), 1, "the bound counts what waits, not what ran")
        XCTAssertThrowsError(try CallbackDispatcher(logLimit: 0))
    }

    /// Issue 31: 190 queued lines once held 207 MB; the queue is bounded in
    /// bytes as well as lines.
    func testLogLinesPastTheByteLimitAreDroppedAndCounted() throws {
        let dispatcher = try CallbackDispatcher(logLimit: 1000, logBytesLimit: 10_000)
        let seen = Seen()
        let logger = Logger(minimum: .debug) { _, message in seen.add(message) }.routed(through: dispatcher)
        let line = String(repeating: "x", count: 3000)
        for _ in 0..<5 { logger.log(.warning, line) }
        logger.log(.warning, "short")  // still fits: 9,005 bytes
        XCTAssertEqual(dispatcher.dispatch(), 5)
        XCTAssertEqual(seen.all.prefix(4).map(\.count), [3000, 3000, 3000, 5])
        XCTAssertTrue(seen.all[4].hasPrefix("dispatch: 2 log line(s) dropped: more than 1000 lines or 10000 bytes"), seen.all[4])
        for _ in 0..<3 { logger.log(.warning, line) }
        XCTAssertEqual(dispatcher.dispatch(), 3, "the bound counts the bytes that wait, not those that ran")
        XCTAssertThrowsError(try CallbackDispatcher(logBytesLimit: 0))
    }

    func testRoutedLoggerSharesItsLevel() throws {
        let dispatcher = try CallbackDispatcher()
        let seen = Seen()
        let original = Logger(minimum: .warning) { _, message in seen.add(message) }
        let routed = original.routed(through: dispatcher)
        routed.log(.info, "hidden")
        original.setMinimum(.debug)
        routed.log(.info, "shown")
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, ["shown"])
        XCTAssertNil(Logger.silent.routed(through: dispatcher).sink, "no sink: nothing to route")
    }

    func testCloseRunsQueuedCompletionsAndDropsTheRest() throws {
        let dispatcher = try CallbackDispatcher()
        let seen = Seen()
        let logger = Logger(minimum: .debug) { _, message in seen.add(message) }.routed(through: dispatcher)
        logger.log(.info, "a line")
        dispatcher.post { seen.add("completion 1") }
        dispatcher.postCounted { seen.add("a listener delivery"); return 1 }
        dispatcher.post { seen.add("completion 2") }
        XCTAssertEqual(dispatcher.close(), 2, "the completions run at close, on its thread")
        XCTAssertEqual(seen.all, ["completion 1", "completion 2"], "lines and deliveries are dropped")
        XCTAssertFalse(dispatcher.hasPending)
        XCTAssertEqual(dispatcher.dispatch(), 0)
        XCTAssertFalse(dispatcher.post { seen.add("late") })
        XCTAssertEqual(dispatcher.close(), 0, "idempotent")
        XCTAssertEqual(seen.all, ["completion 1", "completion 2"])
    }

    func testCloseFromInsideAJobLeavesOnlyCompletionsToThatDispatch() throws {
        let dispatcher = try CallbackDispatcher()
        let seen = Seen()
        let logger = Logger(minimum: .debug) { _, message in seen.add(message) }.routed(through: dispatcher)
        dispatcher.post {
            seen.add("one")
            dispatcher.post { seen.add("queued by one") }
            XCTAssertEqual(dispatcher.close(), 0, "inside a dispatch: left to it")
            seen.add("closed")
        }
        logger.log(.info, "a line after one")
        dispatcher.post { seen.add("two") }
        XCTAssertEqual(dispatcher.dispatch(), 3)
        XCTAssertEqual(seen.all, ["one", "closed", "two", "queued by one"])
    }

    func testClientDeliverCallbackFollowsTheMode() throws {
        let configuration = try AppNorthClientConfiguration(apiURL: "http://127.0.0.1:9", appID: "app")
        let seen = Seen()
        let plain = AppNorthClient(configuration: configuration)
        XCTAssertTrue(plain.deliverCallback { seen.add("inline") })
        XCTAssertEqual(seen.all, ["inline"])
        let dispatcher = try CallbackDispatcher()
        let client = AppNorthClient(configuration: configuration, dispatcher: dispatcher)
        XCTAssertTrue(client.deliverCallback { seen.add("queued") })
        XCTAssertEqual(seen.all, ["inline"])
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, ["inline", "queued"])
        dispatcher.close()
        XCTAssertFalse(client.deliverCallback { seen.add("dropped") })
    }

    func testRegistryCoalescesChangesIntoOneDelivery() throws {
        let dispatcher = try CallbackDispatcher()
        let registry = ListenerRegistry<ConfigChange>(dispatcher: dispatcher, merge: ConfigChange.merged)
        let seen = Seen()
        _ = registry.add { change in seen.add("\(change.config) \(change.changedKeysJSON)") }
        registry.post(ConfigChange(config: #"{"a":1}"#, changedKeys: ["a"], tier: .remote))
        registry.deliverPending()
        registry.post(ConfigChange(config: #"{"a":2,"b":1}"#, changedKeys: ["a", "b"], tier: .remote))
        registry.deliverPending()
        XCTAssertEqual(seen.all, [], "nothing on the posting thread")
        XCTAssertEqual(dispatcher.queuedCount, 1, "one delivery job")
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, [#"{"a":2,"b":1} ["a","b"]"#])
    }

    func testRemovedListenerAndClosedRegistryRunNothingQueued() throws {
        let dispatcher = try CallbackDispatcher()
        let registry = ListenerRegistry<ConfigChange>(dispatcher: dispatcher, merge: ConfigChange.merged)
        let seen = Seen()
        let token = try XCTUnwrap(registry.add { _ in seen.add("removed one") })
        _ = registry.add { _ in seen.add("kept") }
        registry.post(ConfigChange(config: "{}", changedKeys: ["x"], tier: .remote))
        registry.deliverPending()
        XCTAssertTrue(registry.remove(token))
        XCTAssertEqual(dispatcher.dispatch(), 1)
        XCTAssertEqual(seen.all, ["kept"])
        registry.post(ConfigChange(config: "{}", changedKeys: ["y"], tier: .remote))
        registry.deliverPending()
        registry.close()
        XCTAssertEqual(dispatcher.dispatch(), 0, "a closed registry's job runs no callback")
        XCTAssertEqual(seen.all, ["kept"])
    }

    func testPostsFromManyThreadsAllRun() throws {
        let dispatcher = try CallbackDispatcher()
        let count = Atomic<Int>(0)
        let threads = (0..<4).map { _ in
            Thread { for _ in 0..<500 { dispatcher.post { count.add(1, ordering: .relaxed) } } }
        }
        threads.forEach { $0.start() }
        var ran = 0
        while ran < 2000 {
            var p = pollfd(fd: dispatcher.descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, 1000)
            ran += dispatcher.dispatch()
        }
        threads.forEach { $0.join() }
        XCTAssertEqual(count.load(ordering: .relaxed), 2000)
    }
}

/// A joinable pthread for the test above.
private final class Thread: @unchecked Sendable {
    private var id = pthread_t()
    private let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func start() {
        let box = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&id, nil, { raw in
            let thread = Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue()
            thread.body()
            return nil
        }, box)
    }
    func join() { pthread_join(id, nil) }
}
