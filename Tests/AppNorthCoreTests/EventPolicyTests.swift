import XCTest
@testable import AppNorthCore

/// The seed's event rules that are pure policy, driven directly.
final class EventPolicyTests: XCTestCase {
    func testDefaultsAreTheSeedNumbers() {
        let o = AppNorthEventsOptions()
        XCTAssertEqual(o.flushIntervalMilliseconds, 30_000)
        XCTAssertEqual(o.batchThreshold, 20)
        XCTAssertEqual(o.maxQueuedEvents, 10_000)
        XCTAssertEqual(o.maxQueuedBytes, 5 * 1024 * 1024)
        XCTAssertEqual(o.retry.retries, 3)
        XCTAssertEqual(o.breakerThreshold, 5)
        XCTAssertFalse(o.requireConsent)
    }

    func testBatchSizeFollowsTheNetwork() {
        XCTAssertEqual(NetworkType.wifi.batchSize, 100)
        XCTAssertEqual(NetworkType.cellular.batchSize, 50)
        XCTAssertEqual(NetworkType.expensiveCellular.batchSize, 20)
        XCTAssertEqual(NetworkType.unknown.batchSize, 20)
    }

    func testRetryScheduleIsOneTwoFourSecondsWithJitter() {
        let schedule = Backoff(retries: 3)
        XCTAssertEqual((1...3).map { schedule.nominalDelay(retry: $0) }, [1000, 2000, 4000])
        XCTAssertNil(schedule.nominalDelay(retry: 4), "three retries, then the batch waits for the next cycle")
        XCTAssertEqual(schedule.delay(retry: 1, unit: 0), 800)
        XCTAssertEqual(schedule.delay(retry: 1, unit: 0.5), 1000)
        XCTAssertEqual(schedule.delay(retry: 3, unit: 0.999_999), 4800)
    }

    func testStatusCodeHandling() {
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 200), .delivered)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 204), .delivered)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 400), .discard)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 404), .discard)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 408), .retry)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 429), .retry)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 413), .split)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 500), .retry)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: 503), .retry)
        XCTAssertEqual(UploadStatusPolicy.outcome(for: nil), .retry, "network errors keep the events")
    }

    func testCircuitBreakerTripsOnTheFifthFailureInARow() {
        var breaker = CircuitBreaker()
        for _ in 0..<4 { breaker.recordFailure() }
        XCTAssertFalse(breaker.isOpen)
        breaker.recordSuccess()
        for _ in 0..<4 { breaker.recordFailure() }
        XCTAssertFalse(breaker.isOpen, "a success resets the count")
        breaker.recordFailure()
        XCTAssertTrue(breaker.isOpen)
        breaker.reset()
        XCTAssertFalse(breaker.isOpen)
    }

    func testRetryAfterSecondsAndHTTPDateAreCapped() {
        let now: Int64 = 784_111_777_000  // Sun, 06 Nov 1994 08:49:37 GMT
        XCTAssertEqual(RetryAfter.milliseconds("5", nowWallMs: now, capMs: 60_000), 5000)
        XCTAssertEqual(RetryAfter.milliseconds("999", nowWallMs: now, capMs: 60_000), 60_000)
        XCTAssertEqual(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:47 GMT", nowWallMs: now, capMs: 60_000), 10_000)
        XCTAssertEqual(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:27 GMT", nowWallMs: now, capMs: 60_000), 0)
        XCTAssertNil(RetryAfter.milliseconds("soon", nowWallMs: now, capMs: 60_000))
        XCTAssertNil(RetryAfter.milliseconds(nil, nowWallMs: now, capMs: 60_000))
    }

    func testRetryAfterIsReadFrom429And503AnswersOnly() {
        let now: Int64 = 784_111_777_000
        func answer(_ status: Int) -> HTTPResponse { HTTPResponse(status: status, headers: [("retry-after", " 3 ")], body: []) }
        XCTAssertEqual(RetryAfter.milliseconds(for: answer(429), nowWallMs: now, capMs: 60_000), 3000)
        XCTAssertEqual(RetryAfter.milliseconds(for: answer(503), nowWallMs: now, capMs: 60_000), 3000)
        for status in [200, 301, 500, 502, 504] {
            XCTAssertNil(RetryAfter.milliseconds(for: answer(status), nowWallMs: now, capMs: 60_000), "\(status)")
        }
        XCTAssertNil(RetryAfter.milliseconds(for: HTTPResponse(status: 503, headers: [], body: []), nowWallMs: now, capMs: 60_000))
        XCTAssertEqual(AppNorthEventsOptions().retryAfterCapMilliseconds, RetryAfter.defaultCapMilliseconds)
    }

    /// The jitter options at 0 % (appnorth_events_options_set_retry_jitter,
    /// appnorth_config_options_set_reconnect_jitter) set these fractions to
    /// 0: every client then waits exactly the same.
    func testWithoutJitterEveryDelayIsTheNominalOne() {
        let retry = Backoff(retries: 3, baseMilliseconds: 1000, spread: 0)
        for unit in [0, 0.3, 0.999_999] {
            XCTAssertEqual((1...3).map { retry.delay(retry: $0, unit: unit) }, [1000, 2000, 4000])
        }
        let backoff = Backoff(baseMilliseconds: 100, maxMilliseconds: 6000, jitter: 0)
        for unit in [0, 0.3, 0.999_999] {
            XCTAssertEqual((1...8).map { backoff.delay(attempt: $0, random: unit) }, [100, 200, 400, 800, 1600, 3200, 6000, 6000])
        }
        XCTAssertEqual(Backoff(retries: 3).jitter, 0.2, "the shipped retries keep +/- 20 %")
    }

    /// A server's Retry-After is outside input: no value it sends may trap.
    func testRetryAfterExtremeValuesStayWithinTheCap() {
        let now: Int64 = 1_764_480_000_000
        for header in ["9223372036854776", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                       "99999999999999999999999", "-1", "0"] {
            let wait = RetryAfter.milliseconds(header, nowWallMs: now, capMs: 120_000)
            XCTAssertTrue(wait == nil || (0...120_000).contains(wait!), "\(header) gave \(String(describing: wait))")
        }
        XCTAssertEqual(RetryAfter.milliseconds("9223372036854776", nowWallMs: now, capMs: 120_000), 120_000)
        for now in [Int64.min, Int64.max, 0] {
            let wait = RetryAfter.milliseconds("Fri, 31 Dec 9999 23:59:59 GMT", nowWallMs: now, capMs: 60_000)
            XCTAssertTrue((0...60_000).contains(wait ?? 0))
            XCTAssertTrue((0...60_000).contains(RetryAfter.milliseconds("Sun, 06 Nov 2147483647 08:49:37 GMT",
                                                                      nowWallMs: now, capMs: 60_000) ?? 0))
        }
        XCTAssertEqual(RetryAfter.milliseconds("5", nowWallMs: now, capMs: -1), 0, "a negative cap waits not at all")
    }

    func testStoredPayloadsMustBeSoundEvents() {
        let sound = EventPayload.build(id: "e1", name: "n", timestampMs: 1_764_480_000_000,
                                       propertiesJSON: #"{"big":123456789012345678901234567890}"#,
                                       anonymousID: "a", userID: nil, sessionID: "s")
        XCTAssertTrue(EventSoundness.isSound(sound))
        for damaged in ["garbage", "[1]", #"{"name":"n","timestamp":1}"#, #"{"id":"x","timestamp":1}"#,
                        #"{"id":"x","name":"n","timestamp":"1"}"#, #"{"id":"x","name":"n","timestamp":-9223372036854775808}"#,
                        #"{"id":"x","name":"n","timestamp":9223372036854775807}"#, #"{"id":"x","name":"n","timestamp":-1}"#, ""] {
            XCTAssertFalse(EventSoundness.isSound(Array(damaged.utf8)), damaged)
        }
        XCTAssertFalse(EventSoundness.isSound([0xFF, 0xFE]))
    }

    /// The quick check (validator + member walk) must judge every payload as
    /// jansson does, including the shapes it hands over to jansson.
    func testSoundnessCheckAgreesWithJansson() {
        let built = String(decoding: EventPayload.build(id: "e1", name: "n\"\\", timestampMs: 1_764_480_000_000,
                                                         propertiesJSON: #"{"id":1,"a":[{"timestamp":"x"}],"s":"}]\""}"#,
                                                         anonymousID: "a", userID: "u", sessionID: "s"), as: UTF8.self)
        let cases = [
            built, " \(built) ", #"{"id":"x","name":"n","timestamp":0}"#, #"{"id":"x","name":"n","timestamp":-0}"#,
            #"{"id":"x","name":"n","timestamp":253402300799999}"#, #"{"id":"x","name":"n","timestamp":253402300800000}"#,
            #"{"id":"x","name":"n","timestamp":1.5}"#, #"{"id":"x","name":"n","timestamp":1e3}"#,
            #"{"id":"x","name":"n","timestamp":1764480000000.0}"#, #"{"id":"x","name":"n","timestamp":-1e-300}"#,
            #"{"id":"x","name":"n","timestamp":0000}"#, #"{"id":"x","name":"n","timestamp":123456789012345678901234567890}"#,
            #"{"id":"x","name":"n","timestamp":1,"id":2}"#, #"{"id":2,"name":"n","timestamp":1,"id":"x"}"#,
            #"{"\u0069d":"x","name":"n","timestamp":1}"#, #"{"id":"x","\u006eame":5,"name":"n","timestamp":1}"#,
            #"{"id":"x","name":"n","timestamp":1,"timestamp":null}"#, #"{"id":"x","name":"n","timestamp":true}"#,
            #"{"id":"x","name":"n","timestamp":[1]}"#, #"{"id":"x","name":"n","timestamp":{"a":1}}"#,
            #"{"id":"x","name":null,"timestamp":1}"#, #"{"id":{"id":"x"},"name":"n","timestamp":1}"#,
            #"{ "id" : "x" , "name" : "n" , "timestamp" : 7 }"#, #"{"id":"x\u0000","name":"","timestamp":7}"#,
            #"{"id":"x","name":"n","timestamp":7,}"#, #"{"id":"x","name":"n","timestamp":07}"#, "{}", "[]", "7",
            "{\"id\":\"x\",\"name\":\"n\",\"timestamp\":7}\u{0}", #"{"id":"\ud800","name":"n","timestamp":7}"#,
        ]
        for text in cases {
            let bytes = Array(text.utf8)
            XCTAssertEqual(EventSoundness.isSound(bytes), EventSoundness.reference(bytes), text)
        }
        XCTAssertTrue(EventSoundness.isSound(Array(built.utf8)))
        // Every prefix of a real event, cut anywhere (a torn row).
        for end in 0..<built.utf8.count {
            let bytes = Array(built.utf8.prefix(end))
            XCTAssertEqual(EventSoundness.isSound(bytes), EventSoundness.reference(bytes), "cut at \(end)")
        }
    }

    func testRetryScheduleNeverTrapsOnHostValues() {
        let schedule = Backoff(retries: 64, baseMilliseconds: .max, spread: .nan)
        for n in [1, 2, 32, 33, 64] {
            if let delay = schedule.delay(retry: n, unit: 0.5) { XCTAssertGreaterThanOrEqual(delay, 0) }
        }
        XCTAssertEqual(Backoff(retries: 3, baseMilliseconds: 1000, spread: .infinity).delay(retry: 2, unit: 0.9), 2000)
    }

    func testPayloadIntegersAndEscapes() throws {
        for value: Int64 in [0, 7, -42, 1_764_480_000_123, .max, .min] {
            var out: [UInt8] = []
            EventPayload.appendInteger(value, to: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), String(value))
        }
        var out: [UInt8] = []
        EventPayload.appendString("a\u{01}b\tc\\d\"é", to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), #""a\u0001b\tc\\d\"é""#)
        XCTAssertEqual(try JSON.parse(out).stringValue, "a\u{01}b\tc\\d\"é")
    }

    func testIdsAreUniqueAndWellFormed() {
        let ids = (0..<5000).map { _ in Random.uuidV7(unixMilliseconds: 1_700_000_000_000) }
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertTrue(ids.allSatisfy { $0.count == 36 && Array($0)[14] == "7" && Array($0)[8] == "-" })
        XCTAssertEqual(Random.hexToken(bytes: 16).count, 32)
        XCTAssertNotEqual(Random.hexToken(), Random.hexToken())
    }

    func testPayloadSplicesPropertiesVerbatimAndEscapesStrings() throws {
        let bytes = EventPayload.build(id: "id1", name: "tap \"x\"\n", timestampMs: 5, propertiesJSON: #"{"price": 9.99}"#,
                                       anonymousID: "a", userID: nil, sessionID: "s")
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.contains(#""properties":{"price": 9.99}"#), text)
        let parsed = try JSON.parse(bytes)
        XCTAssertEqual(parsed["name"]?.stringValue, "tap \"x\"\n")
        XCTAssertEqual(parsed["user_id"]?.isNull, true)
        XCTAssertEqual(parsed["timestamp"]?.intValue, 5)
    }
}
