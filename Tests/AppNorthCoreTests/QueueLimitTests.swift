import XCTest
import Glibc
@testable import AppNorthCore

/// The limits of the data directory (issue 24): 10,000 events and 5 MB
/// count everything queued there, the oldest by tracked time go first,
/// and the server receives exactly tracked − dropped, through the real
/// dev server.
final class QueueLimitTests: EventsTestCase {
    /// Offline by a fault that answers 503 to every event upload.
    func goOffline() throws { try failEventPosts(count: 1_000_000) }
    func goOnline() throws { try TestServer.delete("/admin/faults") }

    func dropped(_ events: AppNorthEvents) throws -> Int {
        try JSON.parse(events.statsJSON())["dropped"]?["queue_limit"]?.intValue.map { Int($0) } ?? -1
    }

    /// Waits until the stats' queued and `queue_limit` dropped add up to
    /// `tracked` (an attempt in flight counts the rows a trim deleted under
    /// it when it ends).
    func queuedPlusDropped(_ events: AppNorthEvents, is tracked: Int) throws -> Bool {
        var seen = ""
        let met = try eventually {
            let stats = try JSON.parse(events.statsJSON())
            let queued = Int(stats["queued"]?.intValue ?? -1), dropped = Int(stats["dropped"]?["queue_limit"]?.intValue ?? -1)
            seen = "\(queued) queued + \(dropped) dropped"
            return queued + dropped == tracked
        }
        if !met { XCTFail("\(seen), not \(tracked)") }
        return met
    }

    /// The names the server stored with one of `prefixes`, in a set (each
    /// once: the server deduplicates on the event id). Other names would be
    /// a late request of an earlier test, which the server stores after its
    /// reset (FlushInPartsTests delays its uploads by 1 s).
    func storedNames(_ prefixes: [String]) throws -> Set<String> {
        Set(try serverEvents().compactMap { $0["name"]?.stringValue }.filter { name in
            prefixes.contains { name.hasPrefix($0) && name.dropFirst($0.count).allSatisfy(\.isNumber) }
        })
    }

    /// Issue row 1: offline, 10,050 tracked with the default limits and
    /// threshold. The first batch is read at the 20th event and retried;
    /// the limit drops events 0-49 while it waits, so its retry must not
    /// send them. The server gets exactly 10,000: events 50-10,049.
    func testTenThousandFiftyOfflineDeliverTheNewestTenThousand() throws {
        try goOffline()
        let events = try open(quiet {
            $0.batchThreshold = 20
            $0.retry.baseMilliseconds = 400
        })
        for i in 0..<20 { try events.track("e\(i)") }
        XCTAssertTrue(try eventually { try eventPosts() >= 1 }, "the 20th event starts an upload")
        for i in 20..<10_050 { try events.track("e\(i)") }
        // The stats trim now, while the first batch waits for its retry. (If
        // it is in an attempt this moment, its rows go too, but count once
        // the attempt has failed: until then the sum is short of them.)
        XCTAssertEqual(events.queuedCount, 10_000)
        XCTAssertTrue(try queuedPlusDropped(events, is: 10_050))
        try goOnline()
        _ = try? events.flush(timeoutMilliseconds: 60_000)
        XCTAssertTrue(try eventually { events.queuedCount == 0 })
        let names = try storedNames(["e"])
        XCTAssertEqual(names.count, 10_000, "tracked 10,050 − dropped 50")
        XCTAssertEqual(names, Set((50..<10_050).map { "e\($0)" }), "the oldest 50 were dropped, and only they")
        XCTAssertEqual(try dropped(events), 50)
        events.close(timeoutMilliseconds: 0)
    }

    /// Issue row 2: 600 offline events of about 10 KB under the 5 MB
    /// limit: the server receives exactly the ones kept, the newest, and
    /// no more than 5 MB of them.
    func testFiveMegabytesOfLargeEventsDeliverOnlyWhatWasKept() throws {
        try goOffline()
        let events = try open(quiet {
            $0.batchThreshold = 20
            $0.retry.baseMilliseconds = 400
        })
        let filler = String(repeating: "x", count: 10_000)
        for i in 0..<600 { try events.track("big\(i)", propertiesJSON: #"{"pad":"\#(filler)"}"#) }
        XCTAssertTrue(try queuedPlusDropped(events, is: 600))
        XCTAssertLessThanOrEqual(Int(try JSON.parse(events.statsJSON())["queued_bytes"]?.intValue ?? .max), 5 << 20)
        try goOnline()
        _ = try? events.flush(timeoutMilliseconds: 60_000)
        XCTAssertTrue(try eventually { events.queuedCount == 0 })
        let lost = try dropped(events)
        XCTAssertGreaterThan(lost, 0)
        let stored = try storedNames(["big"])
        XCTAssertEqual(stored.count, 600 - lost, "exactly tracked − dropped")
        XCTAssertEqual(stored, Set((lost..<600).map { "big\($0)" }), "the oldest went")
        XCTAssertLessThanOrEqual(stored.count * 10_000, 5 << 20, "no more than 5 MB of events arrived")
        events.close(timeoutMilliseconds: 0)
    }

    /// Issue row 4: two handles on one directory (each with its own
    /// database connection and journal, as two processes have) track 6,000
    /// each offline, B first, then both flush, A first. The 2,000 oldest,
    /// all in B's journal, are dropped by A's trim (a progress mark B's
    /// import honours); the server gets exactly the newest 10,000.
    func testTwoHandlesOfSixThousandEachKeepTheNewestTenThousand() throws {
        try goOffline()
        let b = try open(quiet { $0.batchThreshold = 20 })
        for i in 0..<6_000 { try b.track("b\(i)") }
        sleepMilliseconds(5)  // A's events are all later than B's
        let a = try open(quiet { $0.batchThreshold = 20 })
        for i in 0..<6_000 { try a.track("a\(i)") }
        try goOnline()
        _ = try? a.flush(timeoutMilliseconds: 60_000)
        _ = try? b.flush(timeoutMilliseconds: 60_000)
        XCTAssertTrue(try eventually { a.queuedCount == 0 && b.queuedCount == 0 })
        let names = try storedNames(["a", "b"])
        let newest = Set((0..<6_000).map { "a\($0)" } + (2_000..<6_000).map { "b\($0)" })
        // Rows the other handle's trim deleted under a lease are counted by
        // the lease's owner when its attempt ends (BatchLease): exact.
        print("two handles, B oldest: server stored \(names.count), dropped A \(try dropped(a)) + B \(try dropped(b))")
        XCTAssertEqual(names.count, 12_000 - (try dropped(a) + dropped(b)), "the stats add up to tracked − stored")
        // The newest 10,000; a batch already in an attempt when a trim came
        // may still arrive (delivered, so not dropped): one at most.
        XCTAssertLessThanOrEqual(names.count - 10_000, 20)
        XCTAssertEqual(newest.subtracting(names).count, 0)
        XCTAssertLessThanOrEqual(names.subtracting(newest).count, 20)
        a.close(timeoutMilliseconds: 0)
        b.close(timeoutMilliseconds: 0)
    }

    /// The same with A's events the oldest: A's trim drops its own rows.
    func testTwoHandlesDropTheOldestWhoeverTrims() throws {
        try goOffline()
        let a = try open(quiet { $0.batchThreshold = 20 })
        for i in 0..<6_000 { try a.track("a\(i)") }
        sleepMilliseconds(5)
        let b = try open(quiet { $0.batchThreshold = 20 })
        for i in 0..<6_000 { try b.track("b\(i)") }
        try goOnline()
        _ = try? a.flush(timeoutMilliseconds: 60_000)
        _ = try? b.flush(timeoutMilliseconds: 60_000)
        XCTAssertTrue(try eventually { a.queuedCount == 0 && b.queuedCount == 0 })
        let names = try storedNames(["a", "b"])
        let newest = Set((2_000..<6_000).map { "a\($0)" } + (0..<6_000).map { "b\($0)" })
        print("two handles, A oldest: server stored \(names.count), dropped A \(try dropped(a)) + B \(try dropped(b))")
        XCTAssertEqual(names.count, 12_000 - (try dropped(a) + dropped(b)), "exact (above)")
        XCTAssertEqual(newest.subtracting(names).count, 0)
        XCTAssertLessThanOrEqual(names.subtracting(newest).count, 20, "at most a batch that was in an attempt")
        a.close(timeoutMilliseconds: 0)
        b.close(timeoutMilliseconds: 0)
    }

    /// Rows of older events inserted after newer ones (a journal recovered
    /// late) are still the first to go: the trim follows tracked time, not
    /// table order.
    func testTheTrimFollowsTrackedTimeNotTableOrder() throws {
        try goOffline()
        let old = try open(quiet { $0.maxQueuedEvents = 1_000 })
        for i in 0..<600 { try old.track("old\(i)") }
        // The old handle's journal, as a process killed now leaves it.
        let copies = journalFiles().map { path -> (String, [UInt8]) in (path, (try? readFile(path)) ?? []) }
        old.close(timeoutMilliseconds: 0)
        // Nothing of the old handle is in the table any more...
        let db = try SQLiteStore(directory: DataDirectory(path: folder))
        _ = try db.withConnection { conn throws(AppNorthError) in try conn.run("DELETE FROM events") }
        let new = try open(quiet { $0.maxQueuedEvents = 1_000 })
        for i in 0..<600 { try new.track("new\(i)") }
        new.close(timeoutMilliseconds: 0)
        // ...until its journal turns up again, as an orphan, after the newer rows.
        for (index, (_, bytes)) in copies.enumerated() {
            writeFile(folder + "/events-999999\(index)-r0-0123456789abcdef.journal", bytes)
        }
        let relaunch = try open(quiet { $0.maxQueuedEvents = 1_000 })
        XCTAssertEqual(relaunch.queuedCount, 1_000)
        XCTAssertEqual(try dropped(relaunch), 200)
        try goOnline()
        _ = try? relaunch.flush(timeoutMilliseconds: 60_000)
        XCTAssertEqual(try storedNames(["old", "new"]), Set((200..<600).map { "old\($0)" } + (0..<600).map { "new\($0)" }))
        relaunch.close(timeoutMilliseconds: 0)
    }
}
