import XCTest
@testable import AppNorthCore

/// The transfer engine's wake-up schedule (`EngineSchedule`), driven with
/// numbers: no thread, clock or curl.
final class EngineScheduleTests: XCTestCase {
    typealias S = EngineSchedule
    let ms: UInt64 = 1_000_000

    private func load(idle: Bool = false, timerAt: UInt64? = nil, nearestWait: Deadline? = nil,
                      endedPending: Bool = false, admissionEmpty: Bool = true) -> S.Load {
        S.Load(idle: idle, timerAt: timerAt, nearestWait: nearestWait, endedPending: endedPending,
               admissionEmpty: admissionEmpty)
    }

    func testAnIdleEngineSleepsAnHourAndABusyOneASecondOrUntilCurlsTimer() {
        var s = S(sweepIntervalNs: 2 * ms)
        XCTAssertEqual(s.handle(.pollBegins(now: 0, load(idle: true))), .poll(milliseconds: 3_600_001), "an hour, plus the millisecond that wakes it past the moment")
        XCTAssertEqual(s.wakesAt, 3_600_001 * ms)
        _ = s.handle(.turnBegins)
        XCTAssertNil(s.wakesAt, "a turn runs")
        XCTAssertEqual(s.handle(.turnEnds(now: 10 * ms)), .sweep, "the first turn sweeps")
        _ = s.handle(.swept(nextWaiting: nil))
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load())), .poll(milliseconds: 1001), "swept: a second")
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load(timerAt: 15 * ms))), .poll(milliseconds: 6))
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load(nearestWait: Deadline(nanoseconds: 40 * ms)))),
                       .poll(milliseconds: 31), "a watched wait's deadline")
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load(timerAt: 15 * ms, endedPending: true))),
                       .poll(milliseconds: 0), "ended jobs are finished first")
    }

    func testATurnThatSkippedTheSweepComesBackForItSoon() {
        var s = S(sweepIntervalNs: 2 * ms)
        XCTAssertEqual(s.handle(.turnEnds(now: 10 * ms)), .sweep)
        XCTAssertEqual(s.handle(.turnEnds(now: 11 * ms)), .none, "within the interval: no sweep")
        XCTAssertFalse(s.sweptLastTurn)
        XCTAssertEqual(s.handle(.pollBegins(now: 11 * ms, load())), .poll(milliseconds: 2), "until the sweep is due")
        XCTAssertEqual(s.handle(.pollBegins(now: 11 * ms, load(idle: true))), .poll(milliseconds: 3_600_001),
                       "idle: nothing to sweep for")
        XCTAssertEqual(s.handle(.turnEnds(now: 12 * ms)), .sweep)
    }

    func testTheEarliestWaitingJobsTimeoutBoundsTheSleepUntilTheQueueEmpties() {
        var s = S(sweepIntervalNs: 2 * ms)
        XCTAssertEqual(s.handle(.turnEnds(now: 0)), .none, "no sweep within the interval after the start")
        XCTAssertEqual(s.handle(.turnEnds(now: 10 * ms)), .sweep)
        _ = s.handle(.swept(nextWaiting: Deadline(nanoseconds: 300 * ms)))
        XCTAssertEqual(s.handle(.pollBegins(now: 100 * ms, load(admissionEmpty: false))), .poll(milliseconds: 201))
        XCTAssertEqual(s.handle(.pollBegins(now: 100 * ms, load(admissionEmpty: true))), .poll(milliseconds: 1001),
                       "the last waiting job was admitted")
        XCTAssertNil(s.nextWaitingDeadline)
    }

    func testACallerWakesASleepingEngineOnlyWhenItIsNeededSooner() {
        var s = S(sweepIntervalNs: 2 * ms)
        XCTAssertEqual(s.handle(.callerDone), .none, "before the first poll: the engine is not asleep")
        XCTAssertEqual(s.handle(.turnEnds(now: 10 * ms)), .sweep)
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load())), .poll(milliseconds: 1001))
        XCTAssertEqual(s.handle(.callerDone), .none, "a job that only joined its origin's queue")
        XCTAssertEqual(s.handle(.timerSet(at: 2000 * ms)), .none)
        XCTAssertEqual(s.handle(.callerDone), .none, "curl's timer is later than the wake-up")
        _ = s.handle(.timerSet(at: 5 * ms))
        XCTAssertEqual(s.handle(.callerDone), .wake, "an earlier curl timer")
        XCTAssertEqual(s.handle(.callerDone), .none, "woken once")
        _ = s.handle(.socketWatched)
        XCTAssertEqual(s.handle(.callerDone), .wake, "a new socket")
        _ = s.handle(.waitWatched(deadline: Deadline(nanoseconds: 5000 * ms)))
        XCTAssertEqual(s.handle(.callerDone), .none, "a wait due after the wake-up")
        _ = s.handle(.waitWatched(deadline: Deadline(nanoseconds: 5 * ms)))
        XCTAssertEqual(s.handle(.callerDone), .wake, "a wait due sooner")
        _ = s.handle(.endedOutsideTurn)
        XCTAssertEqual(s.handle(.callerDone), .wake, "a job that ended at its start")
        _ = s.handle(.turnBegins)
        _ = s.handle(.socketWatched)
        XCTAssertEqual(s.handle(.callerDone), .none, "during a turn: it looks before it sleeps")
        XCTAssertEqual(s.handle(.pollBegins(now: 10 * ms, load())), .poll(milliseconds: 1001))
        XCTAssertFalse(s.needed, "a new poll starts with nothing pending")
    }
}
