import Glibc
import XCTest
@testable import AppNorthCore

/// No start call waits on work the engine does for another transfer
/// (issue #31: a start took 425-590 ms while the engine thread inflated
/// gzip bombs under its lock). The inbox's rules on their own, then the
/// engine with one transfer's body work blocked on purpose.
final class TransferEngineStallTests: XCTestCase {
    typealias Inbox = EngineInbox<Int, String>

    func testAnItemLeftWhileTheEngineRunsDoesNotWakeIt() {
        var inbox = Inbox()
        XCTAssertEqual(inbox.post(.arrive(1)), .kept, "the engine runs a turn: it takes the inbox before it sleeps")
        XCTAssertFalse(inbox.pollBegins(), "an item is waiting: no sleep")
        guard case .arrive(1)? = inbox.takeAll().first else { return XCTFail("the job is handed over") }
        XCTAssertTrue(inbox.takeAll().isEmpty, "taken once")
        XCTAssertTrue(inbox.pollBegins())
    }

    func testAnItemLeftWhileTheEnginePollsWakesItAndOrderIsKept() {
        var inbox = Inbox()
        XCTAssertTrue(inbox.pollBegins())
        XCTAssertEqual(inbox.post(.watch("w")), .keptWake, "the engine sleeps in poll(): wake it")
        XCTAssertEqual(inbox.post(.arrive(2)), .keptWake)
        XCTAssertEqual(inbox.post(.reach("w")), .keptWake)
        inbox.pollEnded()
        XCTAssertEqual(inbox.post(.arrive(3)), .kept, "awake again: no wake-up needed")
        let order = inbox.takeAll().map { item -> String in
            switch item {
            case .arrive(let n): "arrive \(n)"
            case .watch(let w): "watch \(w)"
            case .reach(let w): "reach \(w)"
            }
        }
        XCTAssertEqual(order, ["watch w", "arrive 2", "reach w", "arrive 3"], "a reach never overtakes its watch")
    }

    /// One transfer's body work (where curl inflates and the engine copies
    /// a gzip body) is blocked on the engine thread; a read started from
    /// another thread meanwhile returns at once, and completes once the
    /// work goes on. Event-based: the 15 s deadlines only end a failing run.
    func testAStartReturnsWhileTheEngineIsBlockedInAnotherTransfersBody() throws {
        try TestServer.reset()
        _ = try TestServer.board("swift", "Features")
        let gate = Gate()
        let engine = try TransferEngine.shared()
        let context = TransferContext(limit: 1 << 20) { _ in
            gate.set(\.entered)
            // Longer than the test's own waits: a start that waits for
            // this work must fail the test, not outlast it.
            gate.waitFor(\.released, seconds: 60)
            return true
        }
        let blocked = try EasyTransfer(HTTPRequest(method: .get, url: try TestServer.url() + "/admin/faults"),
                                       context: context, transport: TestServer.admin, totalTimeoutMs: 60_000, idleTimeoutMs: 0)
        defer { gate.set(\.released) }
        try engine.add(TransferEngine.Job(transfer: blocked) { _ in gate.set(\.blockedEnded) })
        XCTAssertTrue(gate.waitFor(\.entered), "the engine thread entered the body work")

        let client = try TestServer.client()
        let results = AsyncOperationTests.Results()
        let starter = Thread { gate.set(\.startReturned, ok: (try? client.start(.listBoards, operation: CancellationToken()) { results.put(0, $0) }) != nil) }
        XCTAssertTrue(gate.waitFor(\.startReturned), "the start call returned while the engine was blocked")
        XCTAssertTrue(gate.read(\.ok), "the start call succeeded")
        XCTAssertFalse(gate.read(\.released), "and the blocked work was still blocked then")
        gate.set(\.released)
        starter.join()
        XCTAssertTrue(gate.waitFor(\.blockedEnded))
        let done = results.wait(for: 1)
        guard case .success(let json)? = done[0] else { return XCTFail("read: \(String(describing: done[0]))") }
        XCTAssertTrue(json.contains("Features"), json)
    }

    /// Flags a test thread sets and another waits for (condition, no sleeps).
    final class Gate: @unchecked Sendable {
        struct Flags { var entered = false, released = false, startReturned = false, ok = false, blockedEnded = false }
        private let lock = Lock<Flags>(Flags(), level: LockClass.test)

        func set(_ flag: WritableKeyPath<Flags, Bool>, ok: Bool? = nil) {
            lock.withLock { flags in
                flags[keyPath: flag] = true
                if let ok { flags.ok = ok }
            }
            lock.withLock { _ in lock.broadcast() }
        }

        func read(_ flag: KeyPath<Flags, Bool>) -> Bool { lock.withLock { $0[keyPath: flag] } }

        @discardableResult
        func waitFor(_ flag: KeyPath<Flags, Bool>, seconds: Int = 15) -> Bool {
            lock.withLock { flags in
                // `wait` re-reads the value under the lock on each wake.
                lock.wait(until: { flags[keyPath: flag] }, deadline: Deadline.fromNow(milliseconds: seconds * 1000))
                return flags[keyPath: flag]
            }
        }
    }

    /// A plain pthread running `body`, joined by `join`.
    final class Thread: @unchecked Sendable {
        private var thread = pthread_t()
        private let body: @Sendable () -> Void

        init(_ body: @escaping @Sendable () -> Void) {
            self.body = body
            let raw = Unmanaged.passRetained(self).toOpaque()
            pthread_create(&thread, nil, { raw in
                Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, raw)
        }

        func join() { pthread_join(thread, nil) }
    }
}
