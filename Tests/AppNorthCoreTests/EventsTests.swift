import XCTest
import Dispatch
import Glibc
import Synchronization
@testable import AppNorthCore

/// The event queue against the real server: one test per rule of the seed.
final class EventsTests: EventsTestCase {
    func testTrackIsOnDiskBeforeItReturns() throws {
        let events = try open(quiet())
        try events.track("opened")
        // In this process's journal file, which outlives the process.
        let journaled = try journalFiles().flatMap { JournalRecord.decode(try readFile($0)).events }
        XCTAssertEqual(journaled.count, 1)
        XCTAssertEqual(try JSON.parse(String(decoding: journaled.first?.payload ?? [], as: UTF8.self))["name"]?.stringValue,
                       "opened")
        // Closing moves it into SQLite.
        events.close(timeoutMilliseconds: 0)
        let other = try SQLiteStore(directory: DataDirectory(path: folder))
        let rows = try other.withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT COUNT(*) FROM events") { $0.int(0) }.first
        }
        XCTAssertEqual(rows, 1)
    }

    func testEventCarriesIdTimestampIdentitySessionAndVerbatimProperties() throws {
        let events = try open(quiet())
        try events.identify(userID: "user-42")
        try events.track("purchase", propertiesJSON: #"{"price":9.99,"currency":"EUR"}"#)
        try events.flush(timeoutMilliseconds: 5000)
        let stored = try XCTUnwrap(try serverEvents().first)
        XCTAssertEqual(stored["name"]?.stringValue, "purchase")
        XCTAssertEqual(stored["properties_raw"]?.stringValue, #"{"price":9.99,"currency":"EUR"}"#)
        XCTAssertEqual(stored["user_id"]?.stringValue, "user-42")
        XCTAssertEqual(stored["anonymous_id"]?.stringValue, events.anonymousID)
        XCTAssertEqual(stored["id"]?.stringValue?.count, 36)
        XCTAssertEqual(Array(stored["id"]?.stringValue ?? "")[14], "7", "UUIDv7")
        XCTAssertGreaterThan(stored["timestamp"]?.intValue ?? 0, 1_600_000_000_000)
        XCTAssertFalse(stored["session_id"]?.stringValue?.isEmpty ?? true)
        XCTAssertEqual(events.queuedCount, 0)
    }

    func testFlushReturnsHowManyEventsTheServerAccepted() throws {
        let events = try open(quiet())
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 5000), 0)
        for i in 0..<5 { try events.track("e\(i)") }
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 5000), 5)
        XCTAssertEqual(events.deliveredCount, 5)
        events.close(timeoutMilliseconds: 0)
    }

    func testEventsLeftByAnEarlierRunAreSentSoonAfterOpen() throws {
        let first = try open(quiet())
        try first.track("left over")
        first.close(timeoutMilliseconds: 0)
        XCTAssertEqual(try serverEvents().count, 0)
        // One-hour timer, threshold 10,000, no flush call: only the start-up upload.
        let second = try open(quiet())
        XCTAssertTrue(try eventually { try serverEvents().count == 1 })
        XCTAssertTrue(eventually { second.deliveredCount == 1 }, "the server answered before the count moved")
        second.close(timeoutMilliseconds: 0)
    }

    /// Properties nest at most 32 objects and arrays deep (the object
    /// itself counted): deeper ones are refused by `track` with a clear
    /// error, and nothing is queued (issue 24).
    func testPropertiesNestedDeeperThan32AreRefused() throws {
        let events = try open(quiet())
        func nested(_ depth: Int) -> String {
            // depth objects in all: {"a":{"a":...{}...}}
            String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        }
        XCTAssertTrue(try events.track("deep32", propertiesJSON: nested(32)))
        XCTAssertTrue(try events.track("deep32-array", propertiesJSON: #"{"a":"# + String(repeating: "[", count: 31)
                                       + String(repeating: "]", count: 31) + "}"))
        for depth in [33, 1_500] {
            XCTAssertThrowsError(try events.track("deep", propertiesJSON: nested(depth))) {
                guard case AppNorthError.invalidJSON(let message, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains("nested more than 32 deep"), message)
            }
        }
        XCTAssertEqual(events.queuedCount, 2)
    }

    func testHugeIntegersInPropertiesArriveAsWritten() throws {
        let events = try open(quiet())
        let props = #"{"id":123456789012345678901234567890,"n":-0.0}"#
        try events.track("big", propertiesJSON: props)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().first?["properties_raw"]?.stringValue, props)
    }

    func testTheNULEscapeInPropertiesArrivesAsWritten() throws {
        let events = try open(quiet())
        let props = #"{"s":"a\u0000b"}"#
        try events.track("nul", propertiesJSON: props)
        try events.flush(timeoutMilliseconds: 5000)
        let stored = try XCTUnwrap(try serverEvents().first)
        XCTAssertEqual(stored["properties_raw"]?.stringValue, props)
        XCTAssertEqual(stored["properties"]?["s"]?.stringValue, "a\u{0}b")
    }

    func testCallsAfterCloseAreWrongState() throws {
        let events = try open(quiet())
        events.close(timeoutMilliseconds: 0)
        for call in [{ try events.startSession() }, { try events.foreground() }, { try events.setNetworkType(.wifi) },
                     { try events.setConsent(analytics: true) }, { try events.identify(userID: "u") }, { try events.reset() }] {
            XCTAssertThrowsError(try call()) {
                guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
            }
        }
    }

    func testBadEventsAreRefusedAndNothingIsStored() throws {
        let events = try open(quiet { $0.maxEventBytes = 512 })
        XCTAssertThrowsError(try events.track("")) { XCTAssertEqual(($0 as? AppNorthError).map { "\($0)" }?.hasPrefix("invalidArgument"), true) }
        XCTAssertThrowsError(try events.track("x", propertiesJSON: "[1]"))
        XCTAssertThrowsError(try events.track("x", propertiesJSON: "{\"a\":"))
        XCTAssertThrowsError(try events.track("x", propertiesJSON: #"{"blob":"\#(String(repeating: "z", count: 600))"}"#)) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        // Properties are measured before they are parsed.
        XCTAssertThrowsError(try events.track("x", propertiesJSON: String(repeating: "[", count: 513))) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try events.track("x", propertiesJSON: "{\"a\": 1\u{0}, \"b\": \"x\"}")) {
            guard case AppNorthError.invalidJSON = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(events.queuedCount, 0)
        try events.track("fine")
        XCTAssertEqual(events.queuedCount, 1, "an oversize event never blocks the queue")
    }

    func testFlushesWhenTheBatchThresholdIsReached() throws {
        let events = try open(quiet { $0.batchThreshold = 5 })
        for i in 0..<4 { try events.track("e\(i)") }
        sleepMilliseconds(200)
        XCTAssertEqual(try serverEvents().count, 0, "below the threshold nothing is sent")
        try events.track("e4")
        XCTAssertTrue(try eventually { try serverEvents().count == 5 })
    }

    func testFlushesOnTheTimer() throws {
        let events = try open(quiet { $0.flushIntervalMilliseconds = 150 })
        try events.track("timer")
        XCTAssertTrue(try eventually { try serverEvents().count == 1 })
    }

    func testBatchSizeFollowsTheNetworkType() throws {
        for (type, requests) in [(NetworkType.wifi, 2), (.cellular, 3), (.expensiveCellular, 8), (.unknown, 8)] {
            try TestServer.reset()
            let events = try open(quiet { $0.networkType = type })
            for i in 0..<150 { try events.track("e\(i)") }
            try events.flush(timeoutMilliseconds: 10_000)
            XCTAssertEqual(try eventPosts(), requests, "\(type)")
            XCTAssertEqual(try serverEvents().count, 150)
            events.close(timeoutMilliseconds: 0)
        }
    }

    func testOldestEventsAreDroppedPastTheCountLimit() throws {
        let events = try open(quiet { $0.maxQueuedEvents = 5 })
        for i in 0..<8 { try events.track("e\(i)") }
        XCTAssertEqual(events.queuedCount, 5)
        let stats = try JSON.parse(events.statsJSON())
        XCTAssertEqual(stats["dropped"]?["queue_limit"]?.intValue, 3)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue }, ["e3", "e4", "e5", "e6", "e7"])
    }

    func testOldestEventsAreDroppedPastTheByteLimit() throws {
        let events = try open(quiet { $0.maxQueuedBytes = 2048 })
        let padding = String(repeating: "p", count: 300)
        for i in 0..<10 { try events.track("e\(i)", propertiesJSON: #"{"pad":"\#(padding)"}"#) }
        let stats = try JSON.parse(events.statsJSON())
        XCTAssertLessThanOrEqual(stats["queued_bytes"]?.intValue ?? .max, 2048)
        XCTAssertGreaterThan(stats["dropped"]?["queue_limit"]?.intValue ?? 0, 0)
    }

    func testServerErrorsAreRetriedThreeTimesThenKept() throws {
        let events = try open(quiet())
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"status":500,"count":4,"path_prefix":"/v1/apps/swift/events"}"#)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000)) {
            guard case AppNorthError.server = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try eventPosts(), 4, "one attempt and three retries")
        XCTAssertEqual(events.queuedCount, 1, "5xx keeps the events")
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 1)
    }

    func testNetworkErrorsKeepTheEvents() throws {
        let events = try open(quiet())
        try events.track("e")
        try TestServer.offline {
            XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000)) {
                guard case AppNorthError.network = $0 else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(events.queuedCount, 1)
    }

    func testClientErrorsDiscardTheBatch() throws {
        let events = try open(quiet())
        try events.track("e0")
        try TestServer.post("/admin/faults", #"{"status":400,"count":1,"path_prefix":"/v1/apps/swift/events"}"#)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try eventPosts(), 1, "no retry after a 4xx")
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["client_error"]?.intValue, 1)
    }

    /// A 400 naming no event for a batch of several: the halves go on
    /// their own, down to single events (issue 24); refused all the way
    /// down, every event is discarded, and the flush failed once.
    func testA400RefusingEveryPartDiscardsTheWholeBatch() throws {
        let events = try open(quiet())
        for i in 0..<3 { try events.track("e\(i)") }
        try TestServer.post("/admin/faults", #"{"status":400,"count":5,"path_prefix":"/v1/apps/swift/events"}"#)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try eventPosts(), 5, "[e0 e1 e2], [e0], [e1 e2], [e1], [e2]")
        let stats = try JSON.parse(events.statsJSON())
        XCTAssertEqual(stats["dropped"]?["client_error"]?.intValue, 3)
        XCTAssertEqual(stats["breaker"]?["consecutive_failures"]?.intValue, 1)
    }

    func test408And429AreKeptAndRetried() throws {
        let events = try open(quiet())
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"status":408,"count":1,"path_prefix":"/v1/apps/swift/events"}"#)
        try TestServer.post("/admin/faults", #"{"status":429,"count":1,"path_prefix":"/v1/apps/swift/events"}"#)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 1)
        XCTAssertEqual(try eventPosts(), 3)
    }

    func test429HonoursRetryAfter() throws {
        let events = try open(quiet())
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"status":429,"count":1,"retry_after":"1","path_prefix":"/v1/apps/swift/events"}"#)
        let start = SystemClock().monotonicNanoseconds()
        try events.flush(timeoutMilliseconds: 5000)
        let elapsed = (SystemClock().monotonicNanoseconds() - start) / 1_000_000
        XCTAssertGreaterThanOrEqual(elapsed, 950, "waited for Retry-After: 1 instead of the 10 ms retry base")
        XCTAssertEqual(try serverEvents().count, 1)
    }

    func test413SplitsTheBatchAndDropsASingleOversizeEvent() throws {
        let events = try open(quiet())
        let padding = String(repeating: "p", count: 700)
        for i in 0..<4 { try events.track("small\(i)", propertiesJSON: #"{"pad":"\#(padding)"}"#) }
        try events.track("huge", propertiesJSON: #"{"pad":"\#(String(repeating: "h", count: 3000))"}"#)
        try TestServer.post("/admin/settings", #"{"events_max_body":2500}"#)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(Set(try serverEvents().compactMap { $0["name"]?.stringValue }), ["small0", "small1", "small2", "small3"])
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["payload_too_large"]?.intValue, 1)
    }

    func testCircuitBreakerPausesAfterFiveFailedFlushesUntilANewSession() throws {
        // The default 3 retries (fast through the 10 ms base): each failed
        // flush is 4 requests but one failure.
        let events = try open(quiet())
        XCTAssertEqual(events.options.retry.retries, 3)
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"status":503,"count":100,"path_prefix":"/v1/apps/swift/events"}"#)
        for flush in 1...4 {
            XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000)) {
                guard case AppNorthError.server = $0 else { return XCTFail("flush \(flush): \($0)") }
            }
            XCTAssertEqual(try JSON.parse(events.statsJSON())["breaker"]?["consecutive_failures"]?.intValue, Int64(flush))
        }
        XCTAssertEqual(try eventPosts(), 16, "4 flushes of 1 attempt and 3 retries each, none paused")
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000)) { // the 5th failed flush trips it
            guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try eventPosts(), 20)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        XCTAssertEqual(try eventPosts(), 20, "paused: no more uploads")
        XCTAssertEqual(try JSON.parse(events.statsJSON())["breaker"]?["open"]?.boolValue, true)

        try TestServer.delete("/admin/faults")
        try events.startSession()
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 1)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["breaker"]?["consecutive_failures"]?.intValue, 0)
    }

    func testForegroundAlsoResumesUploads() throws {
        let events = try open(quiet { $0.breakerThreshold = 1; $0.retry.retries = 0 })
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"status":500,"count":1,"path_prefix":"/v1/apps/swift/events"}"#)
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000))
        try events.foreground()
        XCTAssertTrue(try eventually { try serverEvents().count == 1 })
    }

    func testConsentRevokedDropsAndPurgesAndIsRemembered() throws {
        do {
            let events = try open(quiet())
            try events.track("before")
            XCTAssertEqual(events.consent, .unknown)
            try events.setConsent(analytics: false)
            XCTAssertEqual(events.queuedCount, 0, "revoking purges the queue")
            XCTAssertFalse(try events.track("while revoked"))
            XCTAssertEqual(events.queuedCount, 0)
            events.close(timeoutMilliseconds: 0)
        }
        let reopened = try open(quiet())
        XCTAssertEqual(reopened.consent, .revoked, "consent survives a restart")
        XCTAssertFalse(try reopened.track("still revoked"))
        try reopened.setConsent(analytics: true)
        XCTAssertTrue(try reopened.track("after grant"))
        try reopened.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue }, ["after grant"])
    }

    func testRequireConsentStoresNothingBeforeAChoice() throws {
        let events = try open(quiet { $0.requireConsent = true })
        XCTAssertFalse(try events.track("too early"))
        XCTAssertEqual(events.queuedCount, 0)
        try events.setConsent(analytics: true)
        XCTAssertTrue(try events.track("allowed"))
    }

    func testIdentityPersistsInAPrivateFileAndNeverInLogs() throws {
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .debug) { _, line in lines.withLock { $0.append(line) } }
        let first: String
        do {
            let events = try open(quiet(), logger: logger)
            first = events.anonymousID
            try events.identify(userID: "secret-user")
            try events.setPushToken("secret-push")
            try events.track("e")
            try TestServer.offline { _ = try? events.flush(timeoutMilliseconds: 5000) }
            events.close(timeoutMilliseconds: 0)
        }
        var info = stat()
        XCTAssertEqual(stat(folder + "/identity.json", &info), 0)
        XCTAssertEqual(UInt32(info.st_mode) & 0o777, 0o600)
        let reopened = try open(quiet())
        XCTAssertEqual(reopened.anonymousID, first)
        XCTAssertEqual(reopened.userID, "secret-user")
        XCTAssertEqual(try reopened.pushToken(), "secret-push")
        try reopened.reset()
        XCTAssertNil(reopened.userID)
        XCTAssertEqual(reopened.anonymousID, first)
        let logged = lines.withLock { $0.joined(separator: "\n") }
        XCTAssertFalse(logged.isEmpty, "the failed flush was logged")
        XCTAssertFalse(logged.contains("secret") || logged.contains(first), logged)
    }

    /// Issue 10: file secure stores opened on one fresh folder at once (as
    /// several processes would) agree on one anonymous id, and a write by
    /// one never drops a value written by another.
    func testFileSecureStoresShareOneAnonymousIDAndKeepEachOthersValues() throws {
        let directory = try DataDirectory(path: folder + "/shared-identity")
        let made = Lock<[String]>([], level: LockClass.test)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            do {
                let store = try FileSecureStore(directory: directory)
                let id = try store.readOrCreate(Identity.anonymousKey, accept: Identity.isSoundAnonymousID) { "made-by-\(index)" }
                made.withLock { $0.append(id) }
            } catch {
                XCTFail("\(error)")
            }
        }
        XCTAssertEqual(made.withLock { Set($0) }.count, 1, "\(made.withLock { $0 })")
        let one = try FileSecureStore(directory: directory)
        let two = try FileSecureStore(directory: directory)
        try one.write(Identity.userKey, "u1")
        try two.write(Identity.pushTokenKey, "p1")
        XCTAssertEqual(try one.read(Identity.pushTokenKey), "p1")
        XCTAssertEqual(try two.read(Identity.userKey), "u1")
        XCTAssertEqual(try two.read(Identity.anonymousKey), made.withLock { $0.first })
    }

    func testHostSecureStoreIsUsed() throws {
        let store = MemorySecureStore()
        let events = try open(quiet(), secure: store)
        XCTAssertEqual(try store.read("anonymous_id"), events.anonymousID)
        try events.identify(userID: "u1")
        XCTAssertEqual(try store.read("user_id"), "u1")
        XCTAssertFalse(FileManagerFree.exists(folder + "/identity.json"))
    }

    /// Each batch is read while the one before it is in flight: every
    /// event still goes out once, in batches of the network's size.
    func testAFlushSendsEveryBatchOnce() throws {
        let events = try open(quiet { $0.networkType = .wifi })
        for i in 0..<1000 { try events.track("e\(i)") }
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 30_000), 1000)
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try eventPosts(), 10)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue }, (0..<1000).map { "e\($0)" })
    }

    /// The batch read ahead while the one before it is in flight holds
    /// events that the queue limit then drops: it is read again, and the
    /// dropped events never go out. The batch in flight is leased: the
    /// limit does not delete it, and since it is delivered it leaves the
    /// queue anyway, so only the others are counted dropped: exactly what
    /// never arrives (tracked 550 − dropped 50 = 500 stored).
    func testABatchReadAheadIsNotSentOnceTheLimitDropsItsEvents() throws {
        let events = try open(quiet { $0.networkType = .wifi; $0.maxQueuedEvents = 300 })
        for i in 0..<300 { try events.track("e\(i)") }
        // The first two uploads wait 2 s at the server each.
        try TestServer.post("/admin/faults", #"{"delay_ms":2000,"count":2,"path_prefix":"/v1/apps/swift/events"}"#)
        let done = try flushInBackground(events)
        // The first batch (e0-e99) is deleted once the second (e100-e199)
        // is on its way; the third (e200-e299) is read just after.
        XCTAssertTrue(eventually { events.queuedCount == 200 })
        // 250 more while the second waits: the limit owes e100-e199 (in
        // flight) and drops e200-e249.
        for i in 300..<550 { try events.track("e\(i)") }
        XCTAssertTrue(eventually { done.isSet } || eventually { done.isSet })
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["queue_limit"]?.intValue, 50)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue },
                       (0..<200).map { "e\($0)" } + (250..<550).map { "e\($0)" })
    }

    func testAResendAfterACrashIsDeduplicatedByTheServer() throws {
        let events = try open(quiet())
        for i in 0..<3 { try events.track("e\(i)") }
        // A previous process sent these, got its 2xx, and died before deleting them.
        let rows = try SQLiteStore(directory: DataDirectory(path: folder)).withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT payload FROM events ORDER BY seq") { String(decoding: $0.blob(0), as: UTF8.self) }
        }
        _ = try TestServer.admin.perform(HTTPRequest(method: .post, url: try TestServer.url() + "/v1/apps/swift/events",
                                                 headers: [("Content-Type", "application/json")],
                                                 body: Array(("{\"events\":[" + rows.joined(separator: ",") + "]}").utf8)))
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 3)
    }

    func testCloseFlushesWithinItsBound() throws {
        let events = try open(quiet())
        for i in 0..<3 { try events.track("e\(i)") }
        events.close(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().count, 3)
        XCTAssertThrowsError(try events.track("late")) {
            guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
        }
    }

    /// close(300) returns while the server still holds the upload it
    /// started (the server holds it until the test releases it): the bound
    /// is the library's, not the server's answer.
    func testCloseIsBoundedWhileTheServerHangs() throws {
        // Its own app: the held request must not reach a later test's events.
        let events = try open(quiet(), client: TestServer.client(app: "swift-hang"))
        try events.track("e")
        try TestServer.post("/admin/faults", #"{"delay_ms":600000,"count":1,"path_prefix":"/v1/apps/swift-hang/events"}"#)
        // The upload starts (a flush that does not wait for it) and the server holds it.
        _ = try? events.flush(timeoutMilliseconds: 1)
        XCTAssertTrue(try eventually { try TestServer.held() == 1 }, "the server holds the upload")
        events.close(timeoutMilliseconds: 300)
        XCTAssertEqual(try TestServer.held(), 1, "close returned while the server still held its upload")
        try TestServer.release()
    }

    func testEightThreadsTrackWhileFlushesAndConsentChangesRun() throws {
        let events = try open(quiet { $0.batchThreshold = 50; $0.networkType = .wifi })
        let perThread = 150
        let failures = Atomic<Int>(0)
        let done = Atomic<Int>(0)
        var trackers: [BackgroundThread] = []
        // Joined below, failing or not: no tracker outlives the test.
        defer { for thread in trackers { thread.stop() } }
        for t in 0..<8 {
            trackers.append(try BackgroundThread(name: "tracker\(t)") { thread in
                for i in 0..<perThread {
                    if (try? events.track("t\(t)-\(i)", propertiesJSON: #"{"i":\#(i)}"#)) != true {
                        failures.add(1, ordering: .relaxed)
                    }
                }
                done.add(1, ordering: .releasing)
            })
        }
        while done.load(ordering: .acquiring) < 8 {
            _ = try? events.flush(timeoutMilliseconds: 2000)
            try events.setConsent(analytics: true)
        }
        try events.flush(timeoutMilliseconds: 10_000)
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
        let names = try serverEvents().compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(names.count, 8 * perThread, "every accepted event arrived")
        XCTAssertEqual(Set(names).count, 8 * perThread, "exactly once")
    }
}

/// `access` without Foundation's FileManager.
enum FileManagerFree {
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
