import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// The seed's rules that issue 10 pinned down: one rejected event never
/// takes its batch-mates with it, and nothing tracked before a revocation
/// of consent is sent after it.
final class EventRulesTests: EventsTestCase {
    func stats(_ events: AppNorthEvents) throws -> JSON { try JSON.parse(events.statsJSON()) }

    // MARK: One bad event

    func testOneRejectedEventIsDroppedAndItsBatchMatesAreSentAtOnce() throws {
        try TestServer.post("/admin/settings", #"{"rejected_event_names":["legacy_tap"]}"#)
        let events = try open(quiet())
        for i in 0..<20 { try events.track(i == 7 ? "legacy_tap" : "good\(i)") }
        try events.flush(timeoutMilliseconds: 5000)
        let stored = try serverEvents().compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(stored, (0..<20).filter { $0 != 7 }.map { "good\($0)" }, "the 19 valid events arrived")
        XCTAssertEqual(try eventPosts(), 2, "the 422, then the rest at once")
        XCTAssertEqual(events.queuedCount, 0)
        let s = try stats(events)
        XCTAssertEqual(s["dropped"]?["client_error"]?.intValue, 1)
        XCTAssertEqual(s["breaker"]?["consecutive_failures"]?.intValue, 0, "the flush delivered: not a failure")
        XCTAssertEqual(s["last_error"]?["http_status"]?.intValue, 422)
    }

    func testSeveralRejectedEventsAcrossBatches() throws {
        try TestServer.post("/admin/settings", #"{"rejected_event_names":["bad"]}"#)
        let events = try open(quiet())  // unknown network: batches of 20
        for i in 0..<45 { try events.track(i % 10 == 3 ? "bad" : "ok\(i)") }
        try events.flush(timeoutMilliseconds: 10_000)
        XCTAssertEqual(try serverEvents().count, 40)
        XCTAssertEqual(try serverEvents().filter { $0["name"]?.stringValue == "bad" }.count, 0)
        XCTAssertEqual(try stats(events)["dropped"]?["client_error"]?.intValue, 5)
    }

    /// A list that names none of the batch's events says nothing about
    /// which one the server refused: the batch is sent in halves (issue 24).
    func testARejectedListNamingNoneOfTheBatchIsSentInHalves() throws {
        let events = try open(quiet())
        for i in 0..<3 { try events.track("e\(i)") }
        try TestServer.post("/admin/faults", #"""
            {"status":422,"path_prefix":"/v1/apps/swift/events",
             "body":{"error":{"code":"validation","message":"m","rejected":[{"id":"not-in-this-batch"}]}}}
            """#)
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 5000), 3)
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try eventPosts(), 3, "the batch, then its halves [e0] and [e1 e2]")
        XCTAssertEqual(try serverEvents().count, 3)
        XCTAssertEqual(try stats(events)["dropped"]?["client_error"]?.intValue, 0)
        XCTAssertEqual(try stats(events)["breaker"]?["consecutive_failures"]?.intValue, 0)
    }

    func testEveryEventRejectedIsAFailedFlush() throws {
        try TestServer.post("/admin/settings", #"{"rejected_event_names":["bad"]}"#)
        let events = try open(quiet())
        for _ in 0..<3 { try events.track("bad") }
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try eventPosts(), 1)
        XCTAssertEqual(try stats(events)["dropped"]?["client_error"]?.intValue, 3)
    }

    func testRejectedIdsParsing() {
        XCTAssertEqual(RejectedEvents.ids(in: Array(#"{"error":{"rejected":[{"id":"a"},{"id":5},"x",{"id":"b"}]}}"#.utf8)),
                       ["a", "b"])
        XCTAssertNil(RejectedEvents.ids(in: Array(#"{"error":{"code":"validation"}}"#.utf8)))
        XCTAssertNil(RejectedEvents.ids(in: Array(#"{"error":{"rejected":[]}}"#.utf8)))
        XCTAssertNil(RejectedEvents.ids(in: Array("<html>".utf8)))
        XCTAssertNil(RejectedEvents.ids(in: []))
    }

    // MARK: Consent

    /// Waits until the server has taken every injected fault (a delayed
    /// request is then in progress).
    func faultsTaken() throws -> Bool {
        try eventually { (try TestServer.get("/admin/faults")["faults"]?.arrayElements.count ?? -1) == 0 }
    }

    func testRevokingDuringASlowUploadSendsNothingAfterwards() throws {
        let events = try open(quiet())
        for i in 0..<3 { try events.track("before\(i)") }
        // A slow server that then fails: without the consent check, the
        // retry 10 ms later would deliver the purged batch.
        try TestServer.post("/admin/faults", #"{"delay_ms":1500,"status":503,"path_prefix":"/v1/apps/swift/events"}"#)
        let flushed = try flushInBackground(events)
        XCTAssertTrue(try faultsTaken(), "the upload is in progress")
        try events.setConsent(analytics: false)
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertTrue(eventually { flushed.isSet })
        try events.flush(timeoutMilliseconds: 5000)  // any retry of the old cycle would have run by now
        XCTAssertTrue(try eventually { try eventPosts() == 1 }, "the server logged the slow request")
        XCTAssertEqual(try serverEvents().count, 0)

        try events.setConsent(analytics: true)
        try events.track("after")
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue }, ["after"])
        XCTAssertEqual(try eventPosts(), 2, "one slow attempt, never retried, and the new event")
    }

    func testRevokingDuringRetryDelaysStopsTheRetries() throws {
        let events = try open(quiet { $0.retry.baseMilliseconds = 300 })
        try events.track("before")
        try failEventPosts(count: 1)
        let flushed = try flushInBackground(events)
        XCTAssertTrue(try eventually { try eventPosts() == 1 }, "the first attempt failed")
        try events.setConsent(analytics: false)
        XCTAssertTrue(eventually { flushed.isSet })
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try eventPosts(), 1, "no retry after the revocation")
        XCTAssertEqual(try serverEvents().count, 0)
    }

    func testATrackRacingARevocationIsNeverStoredNorSent() throws {
        let events = try open(quiet())
        for round in 0..<40 {
            try events.setConsent(analytics: true)
            let started = Atomic<Int>(0)
            let racers = try (0..<4).map { t in
                try BackgroundThread(name: "racer\(t)") { _ in
                    started.add(1, ordering: .releasing)
                    // Track until the revocation refuses it.
                    while (try? events.track("r\(round)-\(t)")) == true {}
                }
            }
            while started.load(ordering: .acquiring) < 4 { sleepMilliseconds(1) }
            try events.setConsent(analytics: false)
            XCTAssertEqual(events.queuedCount, 0, "round \(round): nothing stored once the revocation returned")
            for racer in racers { racer.stop() }  // each returns at its next, refused, track
            XCTAssertEqual(events.queuedCount, 0, "round \(round): no late insert")
        }
        let rows = try SQLiteStore(directory: DataDirectory(path: folder)).withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT COUNT(*) FROM events") { $0.int(0) }.first
        }
        XCTAssertEqual(rows, 0, "nothing on disk")
        try events.setConsent(analytics: true)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 0, "nothing tracked before a revocation went out after the grant")
    }
}
