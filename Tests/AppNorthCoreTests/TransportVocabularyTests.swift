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
        var before = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        let deadline = Deadline.fromNow(milliseconds: 2500).monotonicTimespec
        let seconds = Double(deadline.tv_sec - before.tv_sec) + Double(deadline.tv_nsec - before.tv_nsec) / 1e9
        XCTAssertTrue((2.5...3.5).contains(seconds), "\(seconds)")
        XCTAssertTrue((0..<1_000_000_000).contains(deadline.tv_nsec))
    }
}
