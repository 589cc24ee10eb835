import Glibc
import XCTest
@testable import AppNorthCore

/// The config's data-source status (issue #40 item 4): the value driven
/// with plain numbers, then a status listener through an outage and a
/// recovery against the real server (faults from its admin endpoints).
final class ConfigStatusTests: XCTestCase {
    typealias S = ConfigStatus

    // MARK: The value

    func testEachOutcomeSetsItsStateAndSinceWhen() {
        var s = S(openedWallMilliseconds: 100)
        XCTAssertEqual(s.state, .initializing)
        XCTAssertEqual(s.sinceWallMilliseconds, 100)
        XCTAssertNil(s.lastError)

        XCTAssertTrue(s.handle(.failed(.network("refused")), wallMilliseconds: 200))
        XCTAssertEqual(s.state, .offline)
        XCTAssertEqual(s.sinceWallMilliseconds, 200)
        XCTAssertEqual(s.lastErrorWallMilliseconds, 200)

        XCTAssertTrue(s.handle(.failed(.server("HTTP 503", httpStatus: 503)), wallMilliseconds: 300))
        XCTAssertEqual(s.state, .interrupted)
        XCTAssertEqual(s.lastError?.httpStatus, 503)

        XCTAssertTrue(s.handle(.answered, wallMilliseconds: 400))
        XCTAssertEqual(s.state, .valid)
        XCTAssertEqual(s.sinceWallMilliseconds, 400)
        XCTAssertEqual(s.lastError, .server("HTTP 503", httpStatus: 503), "the last error outlives the recovery")
        XCTAssertEqual(s.lastErrorWallMilliseconds, 300)
        XCTAssertEqual(s.lastExchange, ConfigFetchStatus(error: nil, wallMilliseconds: 400))

        XCTAssertFalse(s.handle(.answered, wallMilliseconds: 500), "valid again: nothing a listener sees changed")
        XCTAssertEqual(s.sinceWallMilliseconds, 400)
        XCTAssertEqual(s.lastExchange.wallMilliseconds, 500)

        XCTAssertTrue(s.handle(.failed(.timeout("slow")), wallMilliseconds: 600))
        XCTAssertEqual(s.state, .offline, "a timeout got no answer either")
        XCTAssertTrue(s.handle(.failed(.invalidJSON("bad payload", position: 3)), wallMilliseconds: 700))
        XCTAssertEqual(s.state, .interrupted, "an invalid payload is an answer that is not a config")
    }

    func testARepeatedFailureOfOneKindFiresOnceButKeepsTheNewestMessageAndTime() {
        var s = S(openedWallMilliseconds: 0)
        XCTAssertTrue(s.handle(.failed(.network("after 1 ms")), wallMilliseconds: 10))
        XCTAssertFalse(s.handle(.failed(.network("after 2 ms")), wallMilliseconds: 20))
        XCTAssertEqual(s.lastError?.message, "after 2 ms")
        XCTAssertEqual(s.lastErrorWallMilliseconds, 20)
        XCTAssertEqual(s.sinceWallMilliseconds, 10)
        XCTAssertTrue(s.handle(.failed(.server("HTTP 500", httpStatus: 500)), wallMilliseconds: 30))
        XCTAssertTrue(s.handle(.failed(.server("HTTP 503", httpStatus: 503)), wallMilliseconds: 40),
                      "another HTTP status is another error, in the same state")
        XCTAssertEqual(s.state, .interrupted)
        XCTAssertEqual(s.sinceWallMilliseconds, 30)
    }

    func testStopLiveTurnsItOffStartLiveInitializesAndACancelChangesNoState() {
        var s = S(openedWallMilliseconds: 0)
        s.handle(.answered, wallMilliseconds: 10)
        XCTAssertFalse(s.handle(.liveStarted, wallMilliseconds: 15), "starting while valid changes nothing")
        XCTAssertTrue(s.handle(.liveStopped, wallMilliseconds: 20))
        XCTAssertEqual(s.state, .off)
        XCTAssertFalse(s.handle(.failed(.cancelled("cancelled")), wallMilliseconds: 25))
        XCTAssertEqual(s.state, .off)
        XCTAssertNil(s.lastError, "a host's cancel says nothing about the server")
        XCTAssertEqual(s.lastExchange.error, .cancelled("cancelled"), "but it was the latest exchange")
        XCTAssertTrue(s.handle(.liveStarted, wallMilliseconds: 30))
        XCTAssertEqual(s.state, .initializing)
        XCTAssertEqual(s.sinceWallMilliseconds, 30)
    }

    func testADroppedStreamInterruptsOnlyAValidSource() {
        var s = S(openedWallMilliseconds: 0)
        XCTAssertFalse(s.handle(.streamDropped, wallMilliseconds: 5))
        XCTAssertEqual(s.state, .initializing)
        s.handle(.answered, wallMilliseconds: 10)
        XCTAssertTrue(s.handle(.streamDropped, wallMilliseconds: 20))
        XCTAssertEqual(s.state, .interrupted)
        XCTAssertNil(s.lastError, "a stream's end is not an error")
    }

    func testOnlyARefusedCredentialHoldsBackAndNoAnswerStopsTheSource() {
        XCTAssertEqual(S.holdBackMilliseconds(after: .authentication("HTTP 401", httpStatus: 401)), 300_000)
        XCTAssertEqual(S.holdBackMilliseconds(after: .authentication("HTTP 403", httpStatus: 403)), 300_000)
        for error: AppNorthError in [.network("x"), .server("x", httpStatus: 503), .notFound("x"),
                                     .validation("x", httpStatus: 400), .http("x", httpStatus: 418), .tooLarge("x")] {
            XCTAssertNil(S.holdBackMilliseconds(after: error), "\(error)")
        }
        // The hold goes through the worker as a Retry-After would: a refused
        // stream then polls and reconnects no sooner than 5 minutes later.
        var w = ConfigWorkerState(backoff: Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000, jitter: 0),
                                  pollIntervalMilliseconds: 3000)
        w.handle(.startLive, now: 0)
        w.handle(.threadStarted, now: 0)
        XCTAssertEqual(w.next(now: 0), .openStream)
        w.handle(.serverAskedToWait(milliseconds: 300_000), now: 0)
        w.handle(.streamEnded(.refused), now: 0)
        XCTAssertEqual(w.next(now: 0), .sleep(until: Deadline(nanoseconds: 300_000 * 1_000_000)))
        XCTAssertEqual(w.next(now: 299_999 * 1_000_000), .sleep(until: Deadline(nanoseconds: 300_000 * 1_000_000)))
        XCTAssertEqual(w.next(now: 300_000 * 1_000_000), .openStream, "then it tries again: never stopped for good")
    }

    // MARK: At the server

    final class Statuses: Sendable {
        let list = Lock<[ConfigStatus]>([], level: LockClass.test)
        var all: [ConfigStatus] { list.withLock { $0 } }
        func record(_ status: ConfigStatus) { list.withLock { $0.append(status) } }
    }

    private func waitUntil(_ condition: () throws -> Bool) rethrows -> Bool {
        let clock = SystemClock()
        let deadline = clock.monotonicNanoseconds() + 30_000 * 1_000_000  // only catches a hang
        while clock.monotonicNanoseconds() < deadline {
            if try condition() { return true }
            sleepMilliseconds(5)
        }
        return try condition()
    }

    private func open(_ app: String) throws -> AppNorthRemoteConfig {
        let client = try TestServer.client(app: app, timeouts: HTTPTimeouts(apiRequestMilliseconds: 3000,
                                                                           resourceDownloadMilliseconds: 3000,
                                                                           connectMilliseconds: 1000))
        let options = AppNorthRemoteConfig.Options(ttlSeconds: 3600, clock: ManualClock(), pollIntervalMilliseconds: 60_000,
                                                   reconnectBackoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 200))
        return try AppNorthRemoteConfig(client: client, options: options)
    }

    func testTheStatusListenerSeesAnOutageAndTheRecovery() throws {
        _ = try TestServer.url()
        let app = "cfgstatus-" + Random.hexToken(bytes: 6)
        try TestServer.post("/admin/apps/\(app)/config", #"{"config":{"a":1}}"#)
        let config = try open(app)
        defer { config.close(); try? TestServer.delete("/admin/faults") }
        let statuses = Statuses()
        _ = try config.addStatusListener { statuses.record($0) }
        XCTAssertEqual(config.status.state, .initializing)

        // The outage: first no answer at all (dropped connections), then
        // every config request answered 503 (stream, polls).
        // (A request takes the oldest fault that matches: two drops, then 503s.)
        try TestServer.post("/admin/faults", #"{"drop":true,"path_prefix":"/v1/apps/\#(app)/config","count":2}"#)
        try TestServer.post("/admin/faults", #"{"status":503,"path_prefix":"/v1/apps/\#(app)/config","count":100000}"#)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { statuses.all.contains { $0.state == .offline } })
        let offline = try XCTUnwrap(statuses.all.first)
        XCTAssertEqual(offline.state, .offline, "the first status seen")
        XCTAssertEqual(offline.lastError?.httpStatus, 0)
        XCTAssertTrue(waitUntil { statuses.all.contains { $0.lastError?.httpStatus == 503 } }, "\(statuses.all.map { "\($0.state) \($0.lastError?.message ?? "")" }) \(config.status)")
        let outage = try XCTUnwrap(statuses.all.first { $0.lastError?.httpStatus == 503 })
        XCTAssertEqual(outage.state, .interrupted)
        XCTAssertEqual(outage.lastError?.message.hasPrefix("HTTP 503"), true, outage.lastError?.message ?? "")

        try TestServer.delete("/admin/faults")
        XCTAssertTrue(waitUntil { statuses.all.last?.state == .valid })
        let recovered = try XCTUnwrap(statuses.all.last)
        XCTAssertEqual(recovered.lastError?.httpStatus, 503, "the recovery keeps the last error")
        XCTAssertGreaterThanOrEqual(recovered.sinceWallMilliseconds, outage.sinceWallMilliseconds)

        config.stopLiveUpdates()
        XCTAssertEqual(config.status.state, .off)
        XCTAssertEqual(statuses.all.last?.state, .off, "stop_live delivers on the calling thread")
    }

    func testARefusedCredentialIsInterruptedAndHoldsTheThreadBackFiveMinutes() throws {
        _ = try TestServer.url()
        let app = "cfgstatus-" + Random.hexToken(bytes: 6)
        let config = try open(app)
        defer { config.close(); try? TestServer.delete("/admin/faults") }
        try TestServer.post("/admin/faults", #"{"status":401,"path_prefix":"/v1/apps/\#(app)/config","count":1}"#)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { config.status.lastError?.httpStatus == 401 })
        XCTAssertEqual(config.status.state, .interrupted)
        let hold = config.engine.state.withLock { $0.worker.serverNotBefore }
        let remaining = hold.remainingMilliseconds(at: SystemClock().monotonicNanoseconds())
        XCTAssertGreaterThan(remaining, 240_000, "the thread waits about 5 minutes, not the 20 ms backoff")
        XCTAssertLessThanOrEqual(remaining, 300_000)
        XCTAssertTrue(config.isLive, "and the data source is not stopped")
    }
}
