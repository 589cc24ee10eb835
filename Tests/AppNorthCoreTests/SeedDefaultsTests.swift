import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// Every number of the seeds, observed through behaviour on objects built
/// with the library's own defaults (issue 10): a mutation of any default
/// turns a test here red. Time moves on ManualClocks, so nothing sleeps 30 s
/// or an hour; the only real waits are short ones that prove that nothing
/// happened yet.
final class SeedDefaultsTests: EventsTestCase {
    /// Long enough for a woken library thread to act on a loaded machine;
    /// used only to show that something did *not* happen.
    let settle = 300

    func configGets() throws -> Int {
        try (TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
            $0["method"]?.stringValue == "GET" && ($0["path"]?.stringValue ?? "").hasSuffix("/config")
        }.count
    }

    func queuedBytes(_ events: AppNorthEvents) throws -> Int64 {
        try JSON.parse(events.statsJSON())["queued_bytes"]?.intValue ?? -1
    }

    /// Waits until the stats' queued and `queue_limit` dropped add up to
    /// `tracked` (an attempt in flight counts its trimmed rows when it
    /// ends); the count is never negative on the way.
    func queuedPlusDropped(_ events: AppNorthEvents, is tracked: Int64) throws -> Bool {
        var seen = ""
        let met = try eventually {
            let stats = try JSON.parse(events.statsJSON())
            let queued = stats["queued"]?.intValue ?? -1, dropped = stats["dropped"]?["queue_limit"]?.intValue ?? -1
            XCTAssertGreaterThanOrEqual(dropped, 0)
            seen = "\(queued) queued + \(dropped) dropped"
            return queued + dropped == tracked
        }
        if !met { XCTFail("\(seen), not \(tracked)") }
        return met
    }

    /// Event options as the library makes them, on `clock`.
    func defaults(_ clock: ManualClock, _ change: (inout AppNorthEventsOptions) -> Void = { _ in }) throws -> AppNorthEvents {
        var options = AppNorthEventsOptions()
        change(&options)
        return try AppNorthEvents(client: TestServer.client(), directory: DataDirectory(path: folder),
                                  options: options, clock: clock)
    }

    // MARK: Remote config: TTL 3600 s

    func testConfigCacheIsFreshFor3600Seconds() throws {
        let clock = ManualClock()
        try TestServer.post("/admin/apps/swift/config", #"{"config":{"v":1}}"#)
        let client = try TestServer.client()
        let seeded = try AppNorthRemoteConfig(client: client, options: .init(dataDirectory: folder, clock: clock))
        try seeded.refresh()
        seeded.close()
        try TestServer.post("/admin/apps/swift/config", #"{"config":{"v":2}}"#)

        let config = try AppNorthRemoteConfig(client: client, options: .init(dataDirectory: folder, clock: clock))
        defer { config.close() }
        let before = try configGets()
        clock.advance(milliseconds: 3_599_999)
        XCTAssertEqual(config.integer("v", default: 0), 1)
        sleepMilliseconds(settle)
        XCTAssertEqual(try configGets(), before, "fresh until 3600 s: no fetch")
        XCTAssertEqual(config.integer("v", default: 0), 1)
        clock.advance(milliseconds: 1)
        XCTAssertEqual(config.integer("v", default: 0), 1, "stale served while it revalidates")
        XCTAssertTrue(eventually { config.integer("v", default: 0) == 2 }, "expired at 3600 s: fetched")
        XCTAssertEqual(try configGets(), before + 1)
    }

    // MARK: Read cache: TTL 300 s

    func testReadCacheEntriesLive300Seconds() throws {
        let clock = ManualClock()
        let cache = try AppNorthReadCache(storage: MemoryStorage(), clock: clock)
        let scope = "http://h|app|anonymous"
        try cache.storeIdeas(#"[{"id":"i_1"}]"#, scope: scope)
        clock.advance(milliseconds: 299_999)
        XCTAssertEqual(cache.ideas(scope: scope), #"[{"id":"i_1"}]"#)
        clock.advance(milliseconds: 1)
        XCTAssertNil(cache.ideas(scope: scope), "expired at 300 s")
    }

    // MARK: Offline queue: 50 entries

    func testOfflineQueueHolds50Writes() throws {
        let board = try TestServer.board("swift", "defaults")
        let client = try TestServer.client()
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        try TestServer.offline {
            for i in 0..<50 {
                XCTAssertFalse(try queue.submitIdea(using: client, boardID: board, title: "idea \(i)"), "queued \(i)")
            }
            XCTAssertThrowsError(try queue.submitIdea(using: client, boardID: board, title: "one too many")) {
                XCTAssertEqual($0 as? AppNorthError, .queueFull("the offline queue is full; nothing was added"))
            }
        }
        XCTAssertEqual(try queue.flush(using: client), 50)
        XCTAssertEqual(try TestServer.get("/admin/apps/swift/state")["ideas"]?.arrayElements.count, 50)
    }

    // MARK: Events: flush every 30 s or at 20 events

    func testEventsFlushEvery30Seconds() throws {
        let clock = ManualClock()
        let events = try defaults(clock)
        try events.track("timer")
        clock.advance(milliseconds: 29_999)
        sleepMilliseconds(settle)
        XCTAssertEqual(try eventPosts(), 0, "nothing before 30 s")
        clock.advance(milliseconds: 1)
        XCTAssertTrue(try eventually { try serverEvents().count == 1 }, "flushed at 30 s")
        XCTAssertEqual(try eventPosts(), 1)
    }

    func testEventsFlushAt20Events() throws {
        let events = try defaults(ManualClock())  // the clock never reaches 30 s
        for i in 0..<19 { try events.track("e\(i)") }
        sleepMilliseconds(settle)
        XCTAssertEqual(try eventPosts(), 0, "19 events wait")
        try events.track("e19")
        XCTAssertTrue(try eventually { try serverEvents().count == 20 }, "the 20th starts a flush")
        XCTAssertEqual(try eventPosts(), 1)
    }

    // MARK: Events: batches of 100 / 50 / 20

    func testBatchesHold100OnWifi50OnCellularAnd20OnExpensiveOrUnknownNetworks() throws {
        // n events fit one request and n + 1 need two: the batch is exactly n.
        for (type, n) in [(NetworkType.wifi, 100), (.cellular, 50), (.expensiveCellular, 20), (.unknown, 20)] {
            for count in [n, n + 1] {
                try TestServer.reset()
                _ = system("rm -rf '\(folder)'")
                let writer = try open(quiet())  // queues without uploading
                for i in 0..<count { try writer.track("e\(i)") }
                writer.close(timeoutMilliseconds: 0)
                // Reopened with the defaults: at least 20 queued, so it uploads at once.
                let events = try defaults(ManualClock()) { $0.networkType = type }
                XCTAssertTrue(try eventually { try serverEvents().count == count }, "\(type) \(count)")
                XCTAssertEqual(try eventPosts(), count == n ? 1 : 2, "\(type): \(count) events")
                events.close(timeoutMilliseconds: 0)
            }
        }
    }

    // MARK: Events: 10,000 events and 5 MB

    func testQueueKeeps10000EventsAnd5MB() throws {
        // Offline, on a clock that never moves: the first upload fails and
        // its retry waits forever, so the queue only fills.
        try TestServer.offline {
            let events = try defaults(ManualClock())
            for i in 0..<10_002 { try events.track("e\(i)") }
            XCTAssertEqual(events.queuedCount, 10_000)
            XCTAssertTrue(try queuedPlusDropped(events, is: 10_002))
            XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["queue_limit"]?.intValue, 2)
            events.close(timeoutMilliseconds: 0)
        }
        _ = system("rm -rf '\(folder)'")
        try TestServer.offline {
            let events = try defaults(ManualClock())
            let padding = String(repeating: "b", count: 60_000)
            for _ in 0..<100 { try events.track("big", propertiesJSON: #"{"pad":"\#(padding)"}"#) }
            // The 5 MB are the files' (#32, docs/events.md "Disk usage"): the
            // rows get 5 MiB less a tenth, each counted at its pages (61,488
            // bytes for one of these), the tenth and 5 % more hold the WAL
            // and a journal while it drains. So the queue is full up to that
            // share less one event, and the files within 5 MiB and 5 %.
            let bytes = try queuedBytes(events)
            XCTAssertLessThanOrEqual(bytes, 5 * 1024 * 1024 * 9 / 10)
            XCTAssertGreaterThan(bytes, 5 * 1024 * 1024 * 9 / 10 - 61_488, "full up to the rows' share less one event")
            let disk = try JSON.parse(events.statsJSON())["disk_bytes"]?.intValue ?? .max
            XCTAssertLessThanOrEqual(disk, 5 * 1024 * 1024 * 105 / 100, "the files within 5 MB and 5 %")
            // Every event is queued or counted dropped, exactly, once no
            // attempt is in flight: rows a trim deleted under an attempt are
            // counted at its end (BatchLease). Before, this count came out
            // negative (-8, -10) or short: see LeaseAccountingTests.
            XCTAssertTrue(try queuedPlusDropped(events, is: 100))
            events.close(timeoutMilliseconds: 0)
        }
    }

    // MARK: Retries after 1, 2 and 4 s; the breaker at 5 failed flushes

    func testRetriesCome1Then2Then4SecondsApartThenTheBatchWaits() throws {
        let clock = ManualClock()
        let events = try defaults(clock)
        try events.track("e")
        try failEventPosts(count: 4)
        let flushed = try flushInBackground(events)
        XCTAssertTrue(try eventually { try eventPosts() == 1 })
        // Each delay is its nominal value ± 20 % jitter.
        for (retry, nominal) in [(1, 1000), (2, 2000), (3, 4000)] {
            let low = Int64(nominal * 8 / 10), high = Int64(nominal * 12 / 10)
            clock.advance(milliseconds: low - 1)
            sleepMilliseconds(settle)
            XCTAssertEqual(try eventPosts(), retry, "retry \(retry) not before \(low - 1) ms")
            clock.advance(milliseconds: high - low + 1)
            XCTAssertTrue(try eventually { try eventPosts() == retry + 1 }, "retry \(retry) by \(high) ms")
        }
        XCTAssertTrue(eventually { flushed.isSet }, "after 3 retries the flush gives up")
        XCTAssertEqual(try eventPosts(), 4)
        XCTAssertEqual(events.queuedCount, 1, "the batch waits for the next cycle")
    }

    func testBreakerOpensAtTheFifthFailedFlush() throws {
        let clock = ManualClock()
        let events = try defaults(clock)
        try events.track("e")
        try failEventPosts(count: 100)
        // Time runs fast: 30 s timer cycles and their 1/2/4 s retries pass
        // in about a second (more on a loaded machine, hence the deadline).
        try spawn("fast-clock") { thread in
            while !thread.isStopping {
                clock.advance(milliseconds: 500)
                sleepMilliseconds(2)
            }
        }
        let deadline = SystemClock().monotonicNanoseconds() + 30_000_000_000
        while try JSON.parse(events.statsJSON())["breaker"]?["open"]?.boolValue != true,
              SystemClock().monotonicNanoseconds() < deadline {
            sleepMilliseconds(20)
        }
        XCTAssertEqual(try JSON.parse(events.statsJSON())["breaker"]?["open"]?.boolValue, true)
        // The server logs a request just after answering it.
        XCTAssertTrue(try eventually { try eventPosts() == 20 }, "5 failed flushes of 1 attempt and 3 retries")
        XCTAssertEqual(try JSON.parse(events.statsJSON())["breaker"]?["consecutive_failures"]?.intValue, 5)
        sleepMilliseconds(settle)  // many more 30 s cycles pass
        XCTAssertEqual(try eventPosts(), 20, "paused")
    }
}
