@testable import AppNorth
import Dispatch
import Foundation
import Synchronization
import XCTest

/// The library's own threads: a cap, no deadlock when a worker waits for
/// async host code that needs a worker itself, and idle threads ending.
final class BlockingWorkersTests: XCTestCase {
    /// Waits for `semaphore` with a generous bound, failing instead of hanging.
    func waitOrFail(_ semaphore: DispatchSemaphore, _ what: String) {
        XCTAssertEqual(semaphore.wait(timeout: .now() + 30), .success, what)
    }

    func testWorkBeyondTheCapWaitsItsTurn() {
        let pool = BlockingWorkers(maxThreads: 2, idleSeconds: 5)
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let released = Mutex(false)
        let thirdSawRelease = Mutex<Bool?>(nil)
        for _ in 0..<2 {
            pool.submit {
                started.signal()
                release.wait()
                done.signal()
            }
        }
        waitOrFail(started, "the first job started")
        waitOrFail(started, "the second job started")
        pool.submit {
            thirdSawRelease.withLock { $0 = released.withLock { $0 } }
            done.signal()
        }
        // Gives a pool that ignored its cap the chance to run the third job
        // early (the check cannot fail a correct pool).
        Thread.sleep(forTimeInterval: 0.2)
        released.withLock { $0 = true }
        release.signal()
        release.signal()
        for _ in 0..<3 { waitOrFail(done, "every job finished") }
        XCTAssertEqual(thirdSawRelease.withLock { $0 }, true, "the third job ran only once a thread was free")
        XCTAssertLessThanOrEqual(pool.threadCount, 2)
    }

    /// A worker parked waiting for host code does not count: the job that
    /// host code waits for still gets a thread at the cap.
    func testParkedWorkerLetsAnotherJobRun() {
        let pool = BlockingWorkers(maxThreads: 1, idleSeconds: 5)
        let hostDone = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        pool.submit {
            pool.whileWaiting {
                pool.submit { hostDone.signal() }
                hostDone.wait()
            }
            finished.signal()
        }
        waitOrFail(finished, "the parked job was not left waiting for a thread")
    }

    func testIdleThreadsEnd() throws {
        let pool = BlockingWorkers(maxThreads: 4, idleSeconds: 0.05)
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<3 { pool.submit { done.signal() } }
        for _ in 0..<3 { waitOrFail(done, "every job finished") }
        let deadline = Date(timeIntervalSinceNow: 30)
        while pool.threadCount > 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        XCTAssertEqual(pool.threadCount, 0)
    }
}
