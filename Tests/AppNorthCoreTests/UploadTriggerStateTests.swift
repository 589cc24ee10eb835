import XCTest
@testable import AppNorthCore

/// The upload trigger as a value (`UploadTrigger`): driven with numbers,
/// without threads, clocks or sleeps.
final class UploadTriggerStateTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let schedule = Backoff(retries: 3, baseMilliseconds: 1000, spread: 0)

    func trigger() -> UploadTrigger { UploadTrigger(threshold: 20, intervalMilliseconds: 30_000, openedAt: 0) }

    func seen(_ now: UInt64, queued: Int, flush: UInt64 = 0, open: Bool = false) -> UploadTrigger.Inputs {
        .init(now: now, queued: queued, flushRequested: flush, breakerOpen: open)
    }

    func testTheThresholdTheTimerAndFlushStartACycle() {
        let t = trigger()
        XCTAssertEqual(t.next(seen(0, queued: 19)), .sleep(milliseconds: 30_000, wakeAt: 20))
        XCTAssertEqual(t.next(seen(5 * ms, queued: 20)), .runCycle(flushTarget: 0, reason: .threshold))
        XCTAssertEqual(t.next(seen(30_000 * ms, queued: 0)), .runCycle(flushTarget: 0, reason: .timer))
        XCTAssertEqual(t.next(seen(1, queued: 0, flush: 1)), .runCycle(flushTarget: 1, reason: .flush))
    }

    func testAfterADiscardedBatchTheNextTwentyGoAtOnce() {
        var t = trigger()
        let wakeAt = t.cycleEnded(.discarded, at: 100 * ms, flushTarget: 0, queued: 0, failures: 1, schedule: schedule,
                                  retryAfterUntil: 0)
        XCTAssertEqual(wakeAt, 20)
        XCTAssertEqual(t.next(seen(101 * ms, queued: 20)), .runCycle(flushTarget: 0, reason: .threshold))
    }

    func testAfterAKeptBatchTwentyMoreWaitForTheBackoff() {
        var t = trigger()
        // The failed cycle left its 20 events queued; first failed flush: 1 s.
        let wakeAt = t.cycleEnded(.kept, at: 100 * ms, flushTarget: 0, queued: 20, failures: 1, schedule: schedule,
                                  retryAfterUntil: 0)
        XCTAssertEqual(wakeAt, 40)
        XCTAssertEqual(t.next(seen(200 * ms, queued: 39)), .sleep(milliseconds: 29_900, wakeAt: 40))
        // Reached within the backoff: sleep out the rest, no more wakes.
        XCTAssertEqual(t.next(seen(200 * ms, queued: 40)), .sleep(milliseconds: 900, wakeAt: Int.max))
        XCTAssertEqual(t.next(seen(1100 * ms, queued: 40)), .runCycle(flushTarget: 0, reason: .threshold))
    }

    func testTheBackoffDoublesPerFailedFlushUpToTheLastDelay() {
        for (failures, backoff) in [(1, 1000), (2, 2000), (3, 4000), (7, 4000)] {
            var t = trigger()
            _ = t.cycleEnded(.kept, at: 0, flushTarget: 0, queued: 0, failures: failures, schedule: schedule, retryAfterUntil: 0)
            XCTAssertEqual(t.next(seen(0, queued: 20)), .sleep(milliseconds: backoff, wakeAt: Int.max), "\(failures)")
            XCTAssertEqual(t.next(seen(UInt64(backoff) * ms, queued: 20)), .runCycle(flushTarget: 0, reason: .threshold))
        }
    }

    func testARetryAfterLongerThanTheBackoffIsWaitedOut() {
        var t = trigger()
        _ = t.cycleEnded(.kept, at: 0, flushTarget: 0, queued: 0, failures: 1, schedule: schedule,
                         retryAfterUntil: 5000 * ms)
        XCTAssertEqual(t.next(seen(1000 * ms, queued: 20)), .sleep(milliseconds: 4000, wakeAt: Int.max))
        XCTAssertEqual(t.next(seen(5000 * ms, queued: 20)), .runCycle(flushTarget: 0, reason: .threshold))
    }

    func testAnOpenBreakerLeavesOnlyFlushAndTheTimer() {
        var t = trigger()
        XCTAssertEqual(t.cycleEnded(.paused, at: 0, flushTarget: 0, queued: 500, failures: 5, schedule: schedule,
                                    retryAfterUntil: 0), Int.max)
        XCTAssertEqual(t.next(seen(1, queued: 500, open: true)), .sleep(milliseconds: 30_000, wakeAt: Int.max))
        XCTAssertEqual(t.next(seen(1, queued: 500, flush: 1, open: true)), .runCycle(flushTarget: 1, reason: .flush))
    }

    func testAFlushIsCompletedOnceByTheCycleThatRanForIt() {
        var t = trigger()
        guard case .runCycle(let target, _) = t.next(seen(0, queued: 0, flush: 2)) else { return XCTFail() }
        _ = t.cycleEnded(.succeeded, at: 10 * ms, flushTarget: target, queued: 0, failures: 0, schedule: schedule,
                         retryAfterUntil: 0)
        XCTAssertEqual(t.next(seen(10 * ms, queued: 0, flush: 2)), .sleep(milliseconds: 30_000, wakeAt: 20))
        XCTAssertEqual(t.next(seen(10 * ms, queued: 0, flush: 3)), .runCycle(flushTarget: 3, reason: .flush))
    }

    func testHugeFiguresSaturate() {
        var t = UploadTrigger(threshold: Int.max, intervalMilliseconds: Int.max, openedAt: UInt64.max)
        _ = t.cycleEnded(.kept, at: UInt64.max, flushTarget: .max, queued: Int.max, failures: Int.max,
                         schedule: Backoff(retries: 40, baseMilliseconds: Int.max), retryAfterUntil: .max)
        XCTAssertEqual(t.triggerCount, Int.max)
        _ = t.next(seen(0, queued: Int.max, flush: .max))
    }
}
