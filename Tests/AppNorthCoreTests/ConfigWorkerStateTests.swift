import XCTest
@testable import AppNorthCore

/// The config's background-thread schedule as a value
/// (`ConfigWorkerState`): driven with numbers, without threads, clocks or
/// sleeps. Times are in milliseconds from 0 (`t(ms)` gives nanoseconds, `d(ms)`
/// the Deadline at that time).
final class ConfigWorkerStateTests: XCTestCase {
    typealias W = ConfigWorkerState
    /// Jitter off: base 1 s doubling to 60 s.
    let backoff = Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000, jitter: 0)

    func t(_ milliseconds: Int) -> UInt64 { UInt64(milliseconds) * 1_000_000 }
    func d(_ milliseconds: Int) -> Deadline { Deadline(nanoseconds: t(milliseconds)) }

    /// Live updates started on a new thread (poll interval 3 s unless said).
    func live(poll: Int = 3000, backoff: Backoff? = nil) -> W {
        var w = W(backoff: backoff ?? self.backoff, pollIntervalMilliseconds: poll)
        w.handle(.startLive, now: 0)
        w.handle(.threadStarted, now: 0)
        return w
    }

    /// Opens the stream at `at` and ends it with `outcome` at `end`.
    func stream(_ w: inout W, at: Int, end: Int, _ outcome: StreamOutcome) {
        XCTAssertEqual(w.next(now: t(at)), .openStream, "at \(at) ms")
        if outcome == .connected { w.handle(.streamOpened, now: t(at)) }
        w.handle(.streamEnded(outcome), now: t(end))
    }

    func testStreamUpCountsAsFreshAndAReadAsksNothing() {
        var w = live()
        XCTAssertEqual(w.next(now: 0), .openStream)
        XCTAssertEqual(w.phase, .streaming)
        w.handle(.streamOpened, now: t(5))
        XCTAssertTrue(w.streamConnected)
        XCTAssertFalse(w.mayRevalidate(now: t(10)))
        w.handle(.readFoundStale, now: t(10))
        XCTAssertFalse(w.fetchWanted)
        XCTAssertFalse(w.revalidating)
    }

    func testADroppedStreamReconnectsAfterTheBaseDelayAndPollsMeanwhile() {
        var w = live(poll: 3000, backoff: Backoff(baseMilliseconds: 10_000, maxMilliseconds: 60_000, jitter: 0))
        stream(&w, at: 0, end: 100, .connected)
        XCTAssertFalse(w.streamConnected)
        XCTAssertEqual(w.phase, .down(reconnectAt: d(10_100), nextPollAt: d(3100)))
        XCTAssertEqual(w.next(now: t(100)), .sleep(until: d(3100)))
        // The poll interval: every 3 s from the end of the last poll.
        XCTAssertEqual(w.next(now: t(3100)), .fetch(.poll))
        w.handle(.fetchEnded(ok: true), now: t(3200))
        XCTAssertEqual(w.next(now: t(3200)), .sleep(until: d(6200)))
        XCTAssertEqual(w.next(now: t(6200)), .fetch(.poll))
        w.handle(.fetchEnded(ok: false), now: t(6300))
        XCTAssertEqual(w.next(now: t(6300)), .sleep(until: d(9300)))
        XCTAssertEqual(w.next(now: t(9300)), .fetch(.poll))
        w.handle(.fetchEnded(ok: true), now: t(9400))
        // The next poll would be past the reconnect: the reconnect comes first.
        XCTAssertEqual(w.next(now: t(9400)), .sleep(until: d(10_100)))
        XCTAssertEqual(w.next(now: t(10_100)), .openStream)
    }

    func testBackoffDoublesPerFailedAttemptAndRestartsAfterAConnection() {
        var w = live(poll: 86_400_000)
        var now = 0
        for expected in [1000, 2000, 4000, 8000] {
            stream(&w, at: now, end: now, .failed)
            XCTAssertEqual(w.next(now: t(now)), .sleep(until: d(now + expected)), "attempt \(w.attempt)")
            now += expected
        }
        stream(&w, at: now, end: now + 50, .connected)
        XCTAssertEqual(w.attempt, 1)
        XCTAssertEqual(w.next(now: t(now + 50)), .sleep(until: d(now + 1050)))
    }

    func testJitterTakesItsShareOffTheReconnectDelay() {
        var w = live(poll: 86_400_000, backoff: Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000, jitter: 0.5))
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.streamEnded(.failed), now: 0, random: 1)
        XCTAssertEqual(w.next(now: 0), .sleep(until: d(500)))
    }

    func testTheKeepaliveTimeoutEndsAConnectedStreamWhichReconnectsAtTheBaseDelay() {
        // The transport drops a stream silent past its idle timeout (the
        // server's keepalives stopped); something had arrived, so the
        // engine reports .connected, after however many failures before.
        var w = live(poll: 86_400_000)
        stream(&w, at: 0, end: 0, .failed)
        stream(&w, at: 1000, end: 1000, .failed)
        stream(&w, at: 3000, end: 48_000, .connected)
        XCTAssertEqual(w.phase, .down(reconnectAt: d(49_000), nextPollAt: d(48_000 + 86_400_000)))
        XCTAssertEqual(w.next(now: t(49_000)), .openStream)
    }

    func testARefusedStreamPollsAtOnce() {
        var w = live(poll: 3000)
        stream(&w, at: 0, end: 10, .refused)
        XCTAssertEqual(w.next(now: t(10)), .fetch(.poll))
        XCTAssertEqual(w.phase, .polling(reconnectAt: d(1010), answersRead: false))
    }

    func testRetryAfterHoldsBackThePollAndTheReconnect() {
        var w = live(poll: 3000)
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.serverAskedToWait(milliseconds: 5000), now: t(10))
        w.handle(.streamEnded(.refused), now: t(10))
        // The poll due at once and the reconnect at 1010 ms both wait for
        // 5010 ms; a poll that could only start at the reconnect is left to it.
        XCTAssertEqual(w.next(now: t(10)), .sleep(until: d(5010)))
        XCTAssertEqual(w.next(now: t(2000)), .sleep(until: d(5010)))
        XCTAssertEqual(w.next(now: t(5010)), .openStream)
        // A read meanwhile asks nothing.
        XCTAssertFalse(w.mayRevalidate(now: t(4000)))
        XCTAssertTrue(w.mayRevalidate(now: t(5010)))
    }

    func testAShortRetryAfterDelaysThePollButNotPastTheReconnect() {
        var w = live(poll: 3000, backoff: Backoff(baseMilliseconds: 10_000, maxMilliseconds: 60_000, jitter: 0))
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.serverAskedToWait(milliseconds: 2000), now: 0)
        w.handle(.streamEnded(.refused), now: 0)
        XCTAssertEqual(w.next(now: 0), .sleep(until: d(2000)))
        XCTAssertEqual(w.next(now: t(2000)), .fetch(.poll))
    }

    func testARetryAfterAlsoHoldsBackTheFirstStreamAndAOneShotFetch() {
        var w = live()
        w.handle(.serverAskedToWait(milliseconds: 700), now: 0)
        XCTAssertEqual(w.next(now: 0), .sleep(until: d(700)))
        XCTAssertEqual(w.next(now: t(700)), .openStream)

        var once = W(backoff: backoff, pollIntervalMilliseconds: 3000)
        once.handle(.threadStarted, now: 0)
        once.handle(.readFoundStale, now: 0)
        once.handle(.serverAskedToWait(milliseconds: 700), now: 0)
        XCTAssertEqual(once.next(now: t(100)), .sleep(until: d(700)))
        XCTAssertEqual(once.next(now: t(700)), .fetch(.backgroundFetch))
    }

    func testOfflineAReadPollsAtOnceAndAFailureHoldsBackTheNextRead() {
        // No network: every stream attempt fails and so does every poll.
        var w = live(poll: 60_000, backoff: Backoff(baseMilliseconds: 30_000, maxMilliseconds: 60_000, jitter: 0))
        stream(&w, at: 0, end: 0, .failed)
        XCTAssertEqual(w.next(now: t(100)), .sleep(until: d(30_000)))
        XCTAssertTrue(w.mayRevalidate(now: t(200)))
        w.handle(.readFoundStale, now: t(200))
        XCTAssertEqual(w.next(now: t(200)), .fetch(.poll))
        XCTAssertEqual(w.phase, .polling(reconnectAt: d(30_000), answersRead: true))
        w.handle(.fetchEnded(ok: false), now: t(300))
        XCTAssertFalse(w.revalidating)
        XCTAssertEqual(w.failures, 1)
        // The failed revalidation's backoff (30 s) holds back the next read.
        XCTAssertFalse(w.mayRevalidate(now: t(10_000)))
        XCTAssertTrue(w.mayRevalidate(now: t(30_300)))
        XCTAssertEqual(w.next(now: t(300)), .sleep(until: d(30_000)))
        // Back online: the answer resets the failure backoff.
        w.handle(.serverAnswered, now: t(400))
        XCTAssertEqual(w.failures, 0)
        XCTAssertTrue(w.mayRevalidate(now: t(500)))
    }

    func testAReadWhileDownWithAPollHeldBackIsAnsweredByTheReconnect() {
        var w = live(poll: 3000)
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.serverAskedToWait(milliseconds: 5000), now: 0)
        w.handle(.streamEnded(.failed), now: 0)
        // The poll this read asks for could only start at the reconnect
        // (5 s, the Retry-After's end): the reconnect answers it.
        w.handle(.readFoundStale, now: t(5000))
        XCTAssertEqual(w.next(now: t(5000)), .openStream)
        XCTAssertFalse(w.revalidating)
        XCTAssertFalse(w.fetchWanted)
    }

    func testWithoutLiveUpdatesAReadRunsOneFetchThenTheThreadExits() {
        var w = W(backoff: backoff, pollIntervalMilliseconds: 3000)
        XCTAssertEqual(w.next(now: 0), .exit)
        w.handle(.readFoundStale, now: 0)
        XCTAssertTrue(w.revalidating)
        w.handle(.threadStarted, now: 0)
        XCTAssertEqual(w.next(now: 0), .fetch(.backgroundFetch))
        w.handle(.readFoundStale, now: t(1))  // already asked: nothing more
        w.handle(.fetchEnded(ok: false), now: t(100))
        XCTAssertEqual(w.retryNotBefore, d(1100))
        XCTAssertEqual(w.next(now: t(100)), .exit)
        XCTAssertEqual(w.phase, .exited)
    }

    func testAThreadThatCannotStartFailsTheRead() {
        var w = W(backoff: backoff, pollIntervalMilliseconds: 3000)
        w.handle(.readFoundStale, now: 0)
        w.handle(.fetchNotStarted, now: t(10))
        XCTAssertFalse(w.revalidating)
        XCTAssertEqual(w.retryNotBefore, d(1010))
    }

    func testStopEndsLiveUpdatesAndTheJoinClearsWhatTheThreadLeft() {
        var w = live()
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.streamOpened, now: 0)
        w.handle(.stopLive, now: t(5))
        XCTAssertFalse(w.live)
        XCTAssertEqual(w.phase, .exited)
        XCTAssertEqual(w.next(now: t(5)), .exit)
        // The stopped thread reports nothing more; the join clears its flags.
        w.handle(.threadJoined, now: t(6))
        XCTAssertFalse(w.streamConnected)
        XCTAssertTrue(w.mayRevalidate(now: t(6)))
    }

    func testALiveStopWhileDownGoesBackToOneShotFetches() {
        var w = live()
        stream(&w, at: 0, end: 0, .failed)
        w.handle(.startLiveFailed, now: 0)
        XCTAssertEqual(w.next(now: t(1)), .exit)
    }

    func testEventsThatDoNotApplyToThePhaseChangeNothing() {
        var w = live()
        let before = w
        w.handle(.streamEnded(.connected), now: t(1))
        w.handle(.fetchEnded(ok: false), now: t(1))
        w.handle(.streamOpened, now: t(1))
        XCTAssertEqual(w, before)
    }

    func testExtremeWaitsAndTimesSaturateInsteadOfTrapping() {
        // A Swift host may set any backoff, a server any Retry-After, and
        // the clock may stand anywhere: everything saturates at `.never`.
        let now = UInt64.max - 5
        var w = live(poll: 86_400_000, backoff: Backoff(baseMilliseconds: .max, maxMilliseconds: .max, jitter: 0))
        XCTAssertEqual(w.next(now: now), .openStream)
        w.handle(.serverAskedToWait(milliseconds: .max), now: now)
        w.handle(.streamEnded(.refused), now: now)
        XCTAssertEqual(w.next(now: now), .sleep(until: .never))
        XCTAssertFalse(w.mayRevalidate(now: .max - 1))
        w.handle(.serverAskedToWait(milliseconds: -5), now: now)
        XCTAssertEqual(w.next(now: now), .fetch(.poll), "a negative wait is none")
        w.handle(.fetchEnded(ok: false), now: .max - 1)
        XCTAssertEqual(w.next(now: .max - 1), .sleep(until: .never))
    }
}
