import Glibc
import XCTest
@testable import AppNorthCore

/// The shared vocabulary of HTTP exchanges (issue 25 item 2): one mapping
/// of an answer to an error, one deadline, one backoff. Pure values, no
/// server, no sleeps.
final class TransportVocabularyTests: XCTestCase {
    // MARK: HTTPResponse.error

    func testAnAnswerMapsToOneErrorWithTheServersMessage() {
        let body = Array(#"{"error":{"code":"conflict","message":"key reused"}}"#.utf8)
        XCTAssertEqual(HTTPResponse(status: 409, headers: [], body: body).error, .conflict("HTTP 409 conflict: key reused"))
        XCTAssertEqual(HTTPResponse(status: 503, headers: [], body: []).error, .server("HTTP 503", httpStatus: 503))
        XCTAssertEqual(HTTPResponse(status: 422, headers: [], body: Array("not json".utf8)).error,
                       .validation("HTTP 422", httpStatus: 422))
        XCTAssertEqual(HTTPResponse(status: 304, headers: [], body: []).error, .http("HTTP 304", httpStatus: 304))
        for status in [200, 201, 204, 299] {
            XCTAssertNil(HTTPResponse(status: status, headers: [], body: body).error, "\(status)")
        }
        XCTAssertEqual(HTTPResponse(status: 400, headers: [], body: Array(#"{"error":{}}"#.utf8)).serverMessage,
                       "HTTP 400 error")
    }

    // MARK: Deadline

    func testADeadlineIsMillisecondsAfterAMonotonicTime() {
        let deadline = Deadline(milliseconds: 1500, after: 10_000_000_000)
        XCTAssertEqual(deadline.nanoseconds, 11_500_000_000)
        XCTAssertFalse(deadline.hasPassed(at: 11_499_999_999))
        XCTAssertTrue(deadline.hasPassed(at: 11_500_000_000))
        XCTAssertEqual(deadline.remainingMilliseconds(at: 10_000_000_001), 1499)
        XCTAssertEqual(deadline.remainingMillisecondsRoundedUp(at: 10_000_000_001), 1500)
        XCTAssertEqual(deadline.remainingMillisecondsRoundedUp(at: 10_500_000_000), 1000)
        XCTAssertEqual(deadline.sleepMilliseconds(at: 10_000_000_001), 1500)
        XCTAssertEqual(deadline.remainingNanoseconds(at: 12_000_000_000), 0, "passed: nothing left")
        XCTAssertEqual(deadline.remainingMilliseconds(at: .max), 0)
        XCTAssertEqual(deadline.sleepMilliseconds(at: .max), 1)
    }

    func testADeadlineOnAManualClockMovesWithIt() {
        let clock = ManualClock()
        let deadline = Deadline.fromNow(milliseconds: 100, on: clock)
        XCTAssertFalse(deadline.hasPassed(at: clock.monotonicNanoseconds()))
        clock.advance(milliseconds: 99)
        XCTAssertEqual(deadline.remainingMilliseconds(at: clock.monotonicNanoseconds()), 1)
        clock.advance(milliseconds: 1)
        XCTAssertTrue(deadline.hasPassed(at: clock.monotonicNanoseconds()))
    }

    /// Waits come from hosts and servers: no value may trap.
    func testExtremeWaitsSaturateInsteadOfTrapping() {
        XCTAssertEqual(Deadline(milliseconds: -5, after: 7), Deadline(nanoseconds: 7), "a negative wait is now")
        XCTAssertEqual(Deadline(milliseconds: .min, after: .max).nanoseconds, .max)
        XCTAssertEqual(Deadline(milliseconds: .max, after: 1), .never)
        XCTAssertEqual(Deadline(milliseconds: 1, after: .max), .never)
        XCTAssertEqual(Deadline.nanoseconds(milliseconds: .max), .max)
        XCTAssertEqual(Deadline.nanoseconds(milliseconds: -1), 0)
        XCTAssertFalse(Deadline.never.hasPassed(at: .max - 1))
        XCTAssertEqual(Deadline.never.remainingMilliseconds(at: 0), Int(UInt64.max / 1_000_000))
        XCTAssertEqual(Deadline.never.sleepMilliseconds(at: 0), Int(UInt64.max / 1_000_000) + 1)
        XCTAssertEqual(Deadline.never.remainingMillisecondsRoundedUp(at: 0), Int(UInt64.max / 1_000_000) + 1)
        let far = Deadline.never.monotonicTimespec
        XCTAssertEqual(far.tv_sec, Int(UInt64.max / 1_000_000_000))
        XCTAssertEqual(far.tv_nsec, Int(UInt64.max % 1_000_000_000))
        XCTAssertLessThan(Deadline(nanoseconds: 1), Deadline(nanoseconds: 2))
    }

    func testATimespecDeadlineIsOnTheMonotonicClock() {
        var before = timespec(), after = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        let deadline = Deadline.fromNow(milliseconds: 2500).monotonicTimespec
        clock_gettime(CLOCK_MONOTONIC, &after)
        func ns(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }
        // Between the two reads of the same clock, 2.5 s on: no bound on how long the calls took.
        XCTAssertTrue((ns(before) + 2_500_000_000...ns(after) + 2_500_000_000).contains(ns(deadline)),
                      "\(ns(before)) \(ns(deadline)) \(ns(after))")
        XCTAssertTrue((0..<1_000_000_000).contains(deadline.tv_nsec))
    }

    // MARK: Backoff

    /// The merged type gives exactly what the two it replaced gave: their
    /// code, kept here as the reference, over extreme and ordinary inputs.
    func testBothJitterModesGiveWhatTheTypesTheyReplacedGave() {
        let ints = [Int.min, -1000, -1, 0, 1, 2, 3, 20, 999, 1000, 60_000, 1 << 40, Int.max / 2, Int.max]
        let units = [-1, 0, 0.25, 0.5, 0.999_999, 1, 2, .nan, .infinity]
        let shares = [0, 0.2, 0.5, 1, 1.5, -0.5, .nan, .infinity]
        for base in ints {
            for share in shares {
                let events = Backoff(retries: 40, baseMilliseconds: base, spread: share)
                for n in [Int.min, -1, 0, 1, 2, 3, 4, 31, 32, 33, 40, 41, Int.max] {
                    XCTAssertEqual(events.nominalDelay(retry: n), Reference.nominal(base, 40, n), "\(base) \(n)")
                    for unit in units {
                        XCTAssertEqual(events.delay(retry: n, unit: unit), Reference.retry(base, 40, share, n, unit),
                                       "\(base) \(share) \(n) \(unit)")
                    }
                }
                for cap in ints {
                    let config = Backoff(baseMilliseconds: base, maxMilliseconds: cap, jitter: share)
                    for attempt in [Int.min, 0, 1, 2, 7, 62, 63, 64, Int.max] {
                        let old = Reference.Old(base, cap, share)
                        XCTAssertEqual(config.ceiling(attempt: attempt), old.ceiling(attempt))
                        for unit in units {
                            XCTAssertEqual(config.delay(attempt: attempt, random: unit), old.delay(attempt, unit),
                                           "\(base) \(cap) \(share) \(attempt) \(unit)")
                        }
                    }
                }
            }
        }
        XCTAssertEqual(Backoff(retries: 3).jitterMode, .aroundNominal)
        XCTAssertEqual(Backoff.default.jitterMode, .belowCeiling)
        XCTAssertEqual(Backoff.default.retries, .max, "the config reconnects for as long as it runs")
    }

    /// The code of `RetrySchedule` and the old `Backoff`, as they were.
    private enum Reference {
        static func nominal(_ base: Int, _ retries: Int, _ n: Int) -> Int? {
            guard n >= 1, n <= retries, n <= 32 else { return nil }
            return max(0, base).multipliedSaturating(by: 1 << (n - 1))
        }

        static func retry(_ base: Int, _ retries: Int, _ jitter: Double, _ n: Int, _ unit: Double) -> Int? {
            guard let nominal = nominal(base, retries, n) else { return nil }
            let fraction = jitter.isFinite ? min(max(jitter, 0), 1) : 0
            let spread = Double(nominal) * fraction
            let delay = (Double(nominal) - spread + 2 * spread * min(max(unit, 0), 1)).rounded()
            return Int(exactly: delay) ?? nominal
        }

        struct Old {
            let base: Int, cap: Int, jitter: Double
            init(_ base: Int, _ cap: Int, _ jitter: Double) {
                self.base = max(1, base)
                self.cap = max(self.base, cap)
                self.jitter = jitter.isFinite ? min(1, max(0, jitter)) : 0
            }

            func ceiling(_ attempt: Int) -> Int {
                guard attempt > 1 else { return base }
                var delay = base
                for _ in 1..<min(attempt, 63) {
                    if delay >= cap { break }
                    delay = delay > cap / 2 ? cap : delay * 2
                }
                return min(delay, cap)
            }

            func delay(_ attempt: Int, _ random: Double) -> Int {
                let ceiling = Double(ceiling(attempt))
                let r = min(max(random, 0), 1)
                return Int(exactly: (ceiling * (1 - jitter * r)).rounded()) ?? cap
            }
        }
    }
}
