import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// The journal's stripes: threads that track at once append to files of
/// their own, and consent, limits and order still hold across them.
final class StripeTests: EventsTestCase {
    override class var isolatedApp: Bool { true }

    /// Starts `count` threads that each run `body(thread index)` once.
    func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) throws -> [BackgroundThread] {
        try (0..<count).map { t in try BackgroundThread(name: "stripe\(t)") { _ in body(t) } }
    }

    func records(_ path: String) -> Int {
        JournalRecord.decode((try? readFile(path)) ?? []).events.count
    }

    func testThreadsWriteFilesOfTheirOwnAndAnIdleHandleHasOne() throws {
        let events = try open(quiet())
        XCTAssertEqual(journalFiles().count, 1, "an idle handle has one journal file")
        let threads = try run(4) { t in
            for i in 0..<50 { _ = try? events.track("t\(t)-\(i)") }
        }
        for thread in threads { thread.stop() }
        let files = journalFiles()
        // Four threads in a row take four different stripes (round-robin),
        // whatever slots the process's earlier threads took.
        XCTAssertGreaterThanOrEqual(files.count, 4, "\(files)")
        XCTAssertLessThanOrEqual(files.count, EventJournal.stripeCount)
        XCTAssertEqual(files.map(records).reduce(0, +), 200)
        XCTAssertEqual(files.map(records).filter { $0 > 0 }.count, 4, "each thread's 50 events in one file")
        XCTAssertEqual(events.queuedCount, 200)
        events.close(timeoutMilliseconds: 0)
    }

    func testRevocationRacingTrackersLeavesNothingToUpload() throws {
        // Rounds on fresh handles (drop counters are per handle), one data
        // directory: each revokes while four threads track.
        for round in 0..<5 {
            let events = try open(quiet())
            let calls = Atomic<Int>(0)
            let accepted = Atomic<Int>(0)
            let stop = Flag()
            var trackers = try run(4) { t in
                var i = 0
                // At most 2,000 each: below the flush threshold (10,000),
                // whose upload could rightly send events before the
                // revocation comes.
                while !stop.isSet && i < 2000 {
                    if (try? events.track("r\(round)-t\(t)-\(i)")) == true { accepted.add(1, ordering: .relaxed) }
                    calls.add(1, ordering: .relaxed)
                    i += 1
                }
            }
            defer { for thread in trackers { thread.stop() } }
            while accepted.load(ordering: .relaxed) < 400 { sleepMilliseconds(1) }
            try events.setConsent(analytics: false)
            XCTAssertEqual(events.queuedCount, 0, "round \(round): nothing stays queued once the revocation returns")
            stop.set()
            for thread in trackers { thread.stop() }
            trackers = []
            XCTAssertEqual(events.queuedCount, 0, "round \(round)")
            XCTAssertEqual(journalFiles().map(records).reduce(0, +), 0, "round \(round): no journal record left")
            // Every call was either purged or dropped: none slipped past.
            let dropped = try JSON.parse(events.statsJSON())["dropped"]?["consent"]?.intValue ?? -1
            XCTAssertEqual(Int(dropped), calls.load(ordering: .relaxed), "round \(round)")
            try events.setConsent(analytics: true)
            try events.flush(timeoutMilliseconds: 5000)
            XCTAssertEqual(try serverEvents().count, 0, "round \(round): nothing tracked before the revocation is sent")
            events.close(timeoutMilliseconds: 0)
        }
    }

    func testLimitsHoldExactlyWithSeveralStripesActive() throws {
        // Limits far enough from zero that stripes publish their counts in
        // steps (EventStore.queuedAfterAppend): what the host reads is
        // still exact.
        let events = try open(quiet { $0.maxQueuedEvents = 1000 })
        let threads = try run(4) { t in
            for i in 0..<700 { _ = try? events.track("t\(t)-\(i)") }
        }
        for thread in threads { thread.stop() }
        XCTAssertEqual(events.queuedCount, 1000)
        let stats = try JSON.parse(events.statsJSON())
        XCTAssertEqual(stats["queued"]?.intValue, 1000)
        XCTAssertEqual(stats["dropped"]?["queue_limit"]?.intValue, 1800)
        try events.setNetworkType(.wifi)
        try events.flush(timeoutMilliseconds: 20_000)
        let names = try serverEvents().compactMap { $0["name"]?.stringValue }
        XCTAssertEqual(names.count, 1000)
        XCTAssertEqual(Set(names).count, 1000)
        // The oldest went: of each thread's events, the ones kept are its
        // last ones (which threads ran when is the scheduler's business).
        for t in 0..<4 {
            let kept = Set(names.filter { $0.hasPrefix("t\(t)-") })
            XCTAssertEqual(kept, Set((700 - kept.count..<700).map { "t\(t)-\($0)" }), "thread \(t)")
        }
        events.close(timeoutMilliseconds: 0)
    }

    func testAfterAFailedUploadTrackWakesTheUploaderOncePerTwentyEvents() throws {
        // The default flush threshold (20) is within every count's margin,
        // so while uploads work each event counts exactly, all stripes
        // summed: the threshold must wake the uploader the moment it is
        // crossed. After a failed upload the next wake is 20 events more
        // than the failure left, and while the uploader waits out its
        // backoff or runs a cycle `track` does not wake it (and stripes
        // publish in steps, EventStore.queuedAfterAppend).
        let events = try open(quiet { $0.batchThreshold = 20 })
        try failEventPosts(count: 100)
        for i in 0..<5 { _ = try events.track("before-\(i)") }
        XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 20_000), "the upload fails: 503 on every try")
        let attempts = try eventPosts()
        for i in 0..<100 { _ = try events.track("offline-\(i)") }
        XCTAssertEqual(events.queuedCount, 105, "what the host reads is still exact")
        // 20 new events start one more cycle (4 attempts, all refused) after
        // the retry backoff, not one per event (UploadTriggerTests); one may
        // still be under way.
        let more = try eventPosts() - attempts
        XCTAssertLessThanOrEqual(more, 20, "at most one cycle per 20 new events: \(more) more attempts")
        // Uploads work again: the next crossing of the threshold wakes the
        // uploader at once, with no flush call.
        try TestServer.delete("/admin/faults")
        try events.flush(timeoutMilliseconds: 20_000)
        XCTAssertEqual(try serverEvents().count, 105)
        for i in 0..<20 { _ = try events.track("online-\(i)") }
        XCTAssertTrue(try eventually { try serverEvents().count == 125 }, "the 20th event woke the uploader")
        events.close(timeoutMilliseconds: 0)
    }

    func testByteLimitHoldsWithSeveralStripesActive() throws {
        let limit = 400_000
        let events = try open(quiet { $0.maxQueuedBytes = limit })
        let padding = String(repeating: "p", count: 300)
        let threads = try run(4) { t in
            for i in 0..<500 { _ = try? events.track("t\(t)-\(i)", propertiesJSON: #"{"pad":"\#(padding)"}"#) }
        }
        for thread in threads { thread.stop() }
        let stats = try JSON.parse(events.statsJSON())
        let bytes = Int(stats["queued_bytes"]?.intValue ?? .max)
        // The rows get the limit less the WAL's and journal's room (#32).
        XCTAssertLessThanOrEqual(bytes, FileBudget.rowBytes(limit))
        XCTAssertGreaterThan(bytes, FileBudget.rowBytes(limit) - 1000, "only what the limit needs is dropped")
        let queued = Int(stats["queued"]?.intValue ?? 0)
        XCTAssertEqual(queued + Int(stats["dropped"]?["queue_limit"]?.intValue ?? 0), 2000)
        events.close(timeoutMilliseconds: 0)
    }

    func testEventsOfSeveralStripesGoOutInTheOrderTracked() throws {
        let events = try open(quiet { $0.networkType = .wifi })
        // Two threads take turns, a few milliseconds apart: their events
        // sit in two files, and the drain merges them by time.
        let turn = Atomic<Int>(0)
        let threads = try run(2) { t in
            for i in 0..<10 {
                while turn.load(ordering: .acquiring) != 2 * i + t { sleepMilliseconds(1) }
                _ = try? events.track("e\(2 * i + t)")
                sleepMilliseconds(3)
                turn.store(2 * i + t + 1, ordering: .releasing)
            }
        }
        for thread in threads { thread.stop() }
        XCTAssertEqual(journalFiles().map(records).filter { $0 > 0 }.count, 2)
        try events.flush(timeoutMilliseconds: 5000)
        XCTAssertEqual(try serverEvents().compactMap { $0["name"]?.stringValue }, (0..<20).map { "e\($0)" })
        events.close(timeoutMilliseconds: 0)
    }
}
