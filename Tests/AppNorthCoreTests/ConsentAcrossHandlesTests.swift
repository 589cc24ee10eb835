import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// A consent change made through one handle reaches every other handle on
/// the data directory (ConsentWatch): here two handles in one process; the
/// C and Python tests use two processes.
final class ConsentAcrossHandlesTests: EventsTestCase {
    func stats(_ events: AppNorthEvents) throws -> JSON { try JSON.parse(events.statsJSON()) }

    func storedNames() throws -> [String] { try serverEvents().compactMap { $0["name"]?.stringValue } }

    func testARevocationElsewhereStopsTrackingAndPurgesThisHandlesJournal() throws {
        let a = try open(quiet())
        let b = try open(quiet())
        try a.setConsent(analytics: true)
        for i in 0..<5 { XCTAssertTrue(try b.track("b\(i)")) }
        XCTAssertEqual(b.queuedCount, 5, "journaled by b")
        try a.setConsent(analytics: false)
        XCTAssertFalse(try b.track("late"), "a track after the revocation returned is dropped")
        XCTAssertEqual(b.consent, .revoked)
        XCTAssertEqual(b.queuedCount, 0, "b's journal was purged")
        XCTAssertEqual(try stats(b)["dropped"]?["consent"]?.intValue, 6, "5 purged, 1 dropped")
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try eventPosts(), 0)
        XCTAssertEqual(try serverEvents().count, 0)

        try a.setConsent(analytics: true)
        XCTAssertEqual(b.consent, .granted, "a grant reaches b too")
        XCTAssertTrue(try b.track("after"))
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try storedNames(), ["after"])
    }

    /// The upload thread notices a revocation by itself, without a track.
    func testTheUploadThreadOfAnotherHandleSendsNothingAfterARevocation() throws {
        let a = try open(quiet())
        let b = try open(quiet())
        for i in 0..<3 { try b.track("b\(i)") }
        try a.setConsent(analytics: false)
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try eventPosts(), 0)
        // The flush adopted the revocation and purged b's journal.
        XCTAssertEqual(b.queuedCount, 0)
    }

    func testAGrantElsewhereStartsTrackingInARevokedHandle() throws {
        let a = try open(quiet())
        try a.setConsent(analytics: false)
        let b = try open(quiet())
        XCTAssertEqual(b.consent, .revoked, "a handle opened after the revocation starts revoked")
        XCTAssertFalse(try b.track("dropped"))
        try a.setConsent(analytics: true)
        XCTAssertTrue(try b.track("kept"))
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try storedNames(), ["kept"])
    }

    /// A revocation followed at once by a grant, both before b looks: b's
    /// journal from before them is still purged, never uploaded.
    func testEventsFromBeforeARevocationStayPurgedAfterAQuickGrant() throws {
        let a = try open(quiet())
        let b = try open(quiet())
        for i in 0..<4 { try b.track("old\(i)") }
        try a.setConsent(analytics: false)
        try a.setConsent(analytics: true)
        XCTAssertTrue(try b.track("new"))
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try storedNames(), ["new"])
    }

    /// A journal whose name carries an older consent epoch is purged, not
    /// imported, by whichever handle finds it: here one an ended process
    /// left behind. The same journal under the current epoch is imported.
    func testAnEndedProcessJournalFromBeforeARevocationIsPurgedNotImported() throws {
        let a = try open(quiet())
        try a.setConsent(analytics: false)
        try a.setConsent(analytics: true)
        a.close(timeoutMilliseconds: 0)
        let old = folder + "/events-999999-r0-0123456789abcdef.journal"
        let current = folder + "/events-999998-r1-0123456789abcdef.journal"
        writeFile(old, JournalRecord.encode(payload("before")))
        writeFile(current, JournalRecord.encode(payload("after")))
        let b = try open(quiet())
        XCTAssertEqual(b.queuedCount, 1)
        XCTAssertFalse(journalFiles().contains(old), "the old journal is removed")
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try storedNames(), ["after"])
        XCTAssertEqual(try stats(b)["dropped"]?["consent"]?.intValue, 1)
    }

    func testJournalNamesCarryTheirEpoch() {
        XCTAssertEqual(EventJournal.epoch(ofName: "events-12-r7-0123456789abcdef.journal"), 7)
        XCTAssertEqual(EventJournal.epoch(ofName: "events-12-0123456789abcdef.journal"), 0, "names from before epochs")
        XCTAssertNil(EventJournal.epoch(ofName: "events-12-rx-0123456789abcdef.journal"))
        XCTAssertNil(EventJournal.epoch(ofName: "events-12-r-1-0123456789abcdef.journal"))
        XCTAssertNil(EventJournal.epoch(ofName: "other.journal"))
    }

    /// An upload another handle has in progress when the revocation is
    /// made is waited for: once `setConsent` returns, the server has
    /// answered it, and nothing is sent later.
    func testARevocationWaitsForAnotherHandlesUploadInProgress() throws {
        let a = try open(quiet())
        // A request timeout well past the server's delay: a request that
        // timed out would end before the server answered.
        let b = try open(quiet(), client: TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 30_000)))
        for i in 0..<3 { try b.track("b\(i)") }
        // Slow enough that the revocation surely starts while it runs.
        try TestServer.post("/admin/faults", #"{"delay_ms":2000,"status":503,"path_prefix":"/v1/apps/swift/events"}"#)
        let flushed = try flushInBackground(b)
        XCTAssertTrue(try eventually { (try TestServer.get("/admin/faults")["faults"]?.arrayElements.count ?? -1) == 0 },
                      "b's upload is in progress")
        try a.setConsent(analytics: false)
        let requests = try TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []
        XCTAssertEqual(requests.filter { $0["path"]?.stringValue == "/v1/apps/swift/events" }.count, 1,
                       "the slow request was answered before the revocation returned")
        XCTAssertTrue(eventually { flushed.isSet })
        try b.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try eventPosts(), 1, "its batch was not retried")
        XCTAssertEqual(try serverEvents().count, 0)
    }

    /// The fence holds no lock across the request (issue 24): while b's
    /// upload is in progress the flock of consent.watch is free, and the
    /// attempt is registered in a slot of the shared mapping instead, which
    /// a revocation waits for.
    func testAnUploadInProgressHoldsNoFileLockButIsRegistered() throws {
        let b = try open(quiet(), client: TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 30_000)))
        try b.track("b0")
        try TestServer.post("/admin/faults", #"{"delay_ms":1500,"status":503,"path_prefix":"/v1/apps/swift/events"}"#)
        let flushed = try flushInBackground(b)
        XCTAssertTrue(try eventually { (try TestServer.get("/admin/faults")["faults"]?.arrayElements.count ?? -1) == 0 },
                      "b's upload is in progress")
        let fd = Glibc.open(folder + "/" + ConsentWatch.fileName, O_RDWR | O_NOFOLLOW)
        XCTAssertEqual(flock(fd, LOCK_EX | LOCK_NB), 0, "no file lock is held across the request")
        _ = flock(fd, LOCK_UN)
        close(fd)
        let watch = try ConsentWatch(directory: DataDirectory(path: folder))
        XCTAssertEqual(watch.uploadsRegistered, 1)
        XCTAssertFalse(watch.waitForUploads(timeoutMilliseconds: 50), "a revocation would wait for it")
        XCTAssertTrue(eventually { flushed.isSet })
        XCTAssertTrue(watch.waitForUploads(timeoutMilliseconds: 5_000))
        XCTAssertEqual(watch.uploadsRegistered, 0)
    }

    /// A process killed in the middle of an upload leaves its slot behind:
    /// the next revocation finds the process gone, clears it and does not
    /// wait.
    func testTheSlotOfAProcessThatIsGoneDoesNotHoldARevocation() throws {
        let watch = try ConsentWatch(directory: DataDirectory(path: folder))
        var child: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { free(argv[0]) }
        XCTAssertEqual(posix_spawn(&child, "/bin/true", nil, nil, &argv, environ), 0)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(child, &status, 0), child)
        XCTAssertTrue(watch.occupySlotForTesting(pid: child))
        XCTAssertTrue(watch.occupySlotForTesting(pid: getpid()))
        XCTAssertEqual(watch.uploadsRegistered, 2)
        XCTAssertFalse(watch.waitForUploads(timeoutMilliseconds: 30), "this process is alive")
        XCTAssertEqual(watch.uploadsRegistered, 1, "the gone process's slot was cleared")
        watch.clearSlotsForTesting(pid: getpid())
        XCTAssertTrue(watch.waitForUploads(timeoutMilliseconds: 30))
    }

    /// Threads tracking through b while a revokes: whatever b accepted
    /// around the revocation is purged, nothing reaches the server.
    func testTracksRacingARevocationElsewhereAreNeverSent() throws {
        let a = try open(quiet())
        let b = try open(quiet { $0.batchThreshold = 5; $0.flushIntervalMilliseconds = 20 })
        for round in 0..<10 {
            try a.setConsent(analytics: true)
            let started = Atomic<Int>(0)
            let racers = try (0..<3).map { t in
                try BackgroundThread(name: "racer\(t)") { _ in
                    started.add(1, ordering: .releasing)
                    while (try? b.track("r\(round)-\(t)")) == true {}
                }
            }
            while started.load(ordering: .acquiring) < 3 { sleepMilliseconds(1) }
            sleepMilliseconds(5)
            try a.setConsent(analytics: false)
            // Every upload begun before the return has been answered, so
            // logged: anything logged later was sent later.
            let last = try eventPostSeqs().max() ?? 0
            for racer in racers { racer.stop() }
            try b.flush(timeoutMilliseconds: 30_000)
            XCTAssertEqual(try eventPostSeqs().filter { $0 > last }, [], "round \(round): nothing sent after the revocation returned")
            XCTAssertEqual(b.queuedCount, 0, "round \(round)")
        }
    }

    /// The request-log sequence numbers of the event uploads so far.
    func eventPostSeqs() throws -> [Int64] {
        (try TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
            $0["path"]?.stringValue == "/v1/apps/swift/events"
        }.compactMap { $0["seq"]?.intValue }
    }

    func payload(_ name: String) -> [UInt8] {
        EventPayload.build(name: name, timestampMs: 1_700_000_000_000, propertiesJSON: nil,
                           tail: EventPayload.identityTail(anonymousID: "anon", userID: nil, sessionID: "s"))
    }
}
