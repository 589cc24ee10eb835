import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// The event store's files (#32): the database, its WAL and every journal
/// file stay within 5 MiB, plus 5 % for the file system's rounding, at
/// every moment under the default limits, while the queue fills offline
/// and while it drains, read from the file system; and the space comes
/// back after delivery.
final class DiskBudgetTests: EventsTestCase {
    /// 5 MiB (the library's "5 MB": `maxQueuedBytes`) and 5 %.
    static let budget = (5 << 20) + (5 << 20) / 20

    /// The bytes of the database, its WAL and every journal in `folder`,
    /// read from the file system: (total, database, WAL, journals).
    static func files(in folder: String) -> Files {
        func size(_ path: String) -> Int {
            var info = stat()
            return stat(path, &info) == 0 ? Int(info.st_size) : 0
        }
        var journals = 0, largest = 0
        if let dir = opendir(folder) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard name.hasPrefix(EventJournal.prefix) && name.hasSuffix(EventJournal.suffix) else { continue }
                let bytes = size(folder + "/" + name)
                journals += bytes
                largest = max(largest, bytes)
            }
            closedir(dir)
        }
        return Files(db: size(folder + "/appnorth.sqlite3"), wal: size(folder + "/appnorth.sqlite3-wal"), journals: journals,
                     largestJournal: largest)
    }

    struct Files: CustomStringConvertible {
        var db = 0, wal = 0, journals = 0, largestJournal = 0
        var total: Int { db + wal + journals }
        var description: String { "\(total) (database \(db), WAL \(wal), journals \(journals))" }
    }
    func files() -> Files { Self.files(in: folder) }

    /// The largest `files()` seen, sampled every millisecond on a thread
    /// (its parts as they were at that moment).
    final class Peak: Sendable {
        let total = Atomic<Int>(0), db = Atomic<Int>(0), wal = Atomic<Int>(0), journals = Atomic<Int>(0)
        var value: Files { Files(db: db.load(ordering: .acquiring), wal: wal.load(ordering: .acquiring),
                                 journals: journals.load(ordering: .acquiring)) }
        func note(_ seen: Files) {
            guard seen.total > total.load(ordering: .relaxed) else { return }
            total.store(seen.total, ordering: .relaxed)
            db.store(seen.db, ordering: .releasing)
            wal.store(seen.wal, ordering: .releasing)
            journals.store(seen.journals, ordering: .releasing)
        }
    }

    final class Count: Sendable { let value = Atomic<Int>(0) }

    func watchFiles() throws -> Peak {
        let peak = Peak(), folder = self.folder
        try spawn("disk-sampler") { thread in
            repeat { peak.note(Self.files(in: folder)) } while thread.sleep(milliseconds: 1)
        }
        return peak
    }

    /// Default limits, offline (the dev server answers 503): `count` events
    /// of `padding` characters fill the queue past its limits; then online,
    /// everything kept is delivered. Returns the peak and the kept count.
    func fillAndDrain(_ count: Int, padding: Int, label: String) throws -> Int {
        try failEventPosts(count: 1_000_000)
        let events = try open(AppNorthEventsOptions())
        let peak = try watchFiles()
        let filler = String(repeating: "x", count: padding)
        for i in 0..<count { try events.track("big\(i)", propertiesJSON: #"{"pad":"\#(filler)"}"#) }
        XCTAssertTrue(try eventually {
            let stats = try JSON.parse(events.statsJSON())
            return (stats["queued"]?.intValue ?? 0) + (stats["dropped"]?["queue_limit"]?.intValue ?? 0) == Int64(count)
        })
        let stats = try JSON.parse(events.statsJSON())
        let kept = Int(stats["queued"]?.intValue ?? -1)
        let full = files()
        print("disk budget \(label): \(kept) of \(count) kept, queued_bytes \(stats["queued_bytes"]?.intValue ?? -1), "
              + "disk_bytes \(stats["disk_bytes"]?.intValue ?? -1); files \(full); peak while filling \(peak.value)")
        XCTAssertEqual(Int(stats["disk_bytes"]?.intValue ?? -1), full.total, "stats report the files' bytes")
        XCTAssertLessThanOrEqual(Int(stats["queued_bytes"]?.intValue ?? .max), 5 << 20)
        try TestServer.delete("/admin/faults")
        _ = try? events.flush(timeoutMilliseconds: 60_000)
        XCTAssertTrue(try eventually { events.queuedCount == 0 })
        events.close(timeoutMilliseconds: 0)
        let after = files().total
        print("disk budget \(label): peak \(peak.value) bytes in all; \(after) after delivery and close")
        XCTAssertLessThanOrEqual(peak.value.total, Self.budget, "5 MiB and 5 % at every moment: \(peak.value)")
        XCTAssertLessThan(after, 256 << 10, "the space came back")
        return kept
    }

    func testTenKilobyteEventsKeepTheFilesWithinFiveMegabytes() throws {
        XCTAssertGreaterThan(try fillAndDrain(600, padding: 10_000, label: "10 KB"), 300)
    }

    func testSixtyKilobyteEventsKeepTheFilesWithinFiveMegabytes() throws {
        XCTAssertGreaterThan(try fillAndDrain(100, padding: 60_000, label: "60 KB"), 50)
    }

    /// The limit is the directory's, not a handle's: two handles on one
    /// directory (each with its own connection and journal, as two
    /// processes have) track 600 events of 10 KB each at once, offline.
    /// The files stay within 5 MiB and 5 % at every moment; what was not
    /// dropped (counted, `queue_limit`) arrives.
    func testTwoHandlesTrackingAtOnceKeepTheFilesWithinFiveMegabytes() throws {
        try failEventPosts(count: 1_000_000)
        // Default limits; retries at 10 ms, so that an attempt whose rows a
        // trim deleted ends (and counts them) within the wait below.
        var options = AppNorthEventsOptions()
        options.retry.baseMilliseconds = 10
        let handles = [try open(options), try open(options)]
        let peak = try watchFiles()
        let filler = String(repeating: "x", count: 10_000)
        let finished = Count()
        var start = timespec(), end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        for (label, events) in zip(["a", "b"], handles) {
            try spawn("tracker-\(label)") { _ in
                for i in 0..<600 { _ = try? events.track("\(label)\(i)", propertiesJSON: #"{"pad":"\#(filler)"}"#) }
                finished.value.add(1, ordering: .releasing)
            }
        }
        // Up to a minute on a loaded machine (eventually waits 5 s).
        var done = false
        for _ in 0..<12 where !done { done = eventually { finished.value.load(ordering: .acquiring) == 2 } }
        XCTAssertTrue(done, "both handles tracked their 600")
        clock_gettime(CLOCK_MONOTONIC, &end)
        let trackingMs = (end.tv_sec - start.tv_sec) * 1000 + (end.tv_nsec - start.tv_nsec) / 1_000_000
        var dropped = 0
        XCTAssertTrue(try eventually {
            let stats = try handles.map { try JSON.parse($0.statsJSON()) }
            dropped = stats.reduce(0) { $0 + Int($1["dropped"]?["queue_limit"]?.intValue ?? 0) }
            return Int(stats[0]["queued"]?.intValue ?? 0) + dropped == 1_200
        }, "queued and dropped add up to the 1,200 tracked")
        print("disk budget, two handles: tracked in \(trackingMs) ms, \(dropped) of 1200 dropped; peak while filling \(peak.value)")
        XCTAssertLessThanOrEqual(peak.value.total, Self.budget, "5 MiB and 5 % at every moment: \(peak.value)")
        try TestServer.delete("/admin/faults")
        for events in handles { _ = try? events.flush(timeoutMilliseconds: 60_000) }
        XCTAssertTrue(try eventually { handles.allSatisfy { $0.queuedCount == 0 } })
        // The first flush may trim again while the other handle's journal
        // still holds events (FileBudget.sharedRowBytes): counted too.
        var stored = 0
        XCTAssertTrue(try eventually {
            dropped = try handles.reduce(0) { $0 + Int(try JSON.parse($1.statsJSON())["dropped"]?["queue_limit"]?.intValue ?? 0) }
            stored = Set(try serverEvents().compactMap { $0["name"]?.stringValue }).count
            return stored == 1_200 - dropped
        }, "exactly tracked - dropped arrived: \(stored) stored, \(dropped) dropped")
        for events in handles { events.close(timeoutMilliseconds: 0) }
        XCTAssertLessThanOrEqual(peak.value.total, Self.budget, "and while it drained: \(peak.value)")
    }

    /// While another handle's journal holds events, a handle's journal
    /// goes in once it holds a sixteenth of the rows' share (288 KiB):
    /// left to grow to the files' bound, two handles imported 1 MB
    /// journals each at once (5.61 MB, over the budget).
    func testASharedDirectoryKeepsEachJournalSmall() throws {
        try failEventPosts(count: 1_000_000)
        let first = try open(AppNorthEventsOptions()), second = try open(AppNorthEventsOptions())
        try first.track("other", propertiesJSON: nil)
        let filler = String(repeating: "x", count: 10_000)
        var largest = 0
        for i in 0..<100 {
            try second.track("big\(i)", propertiesJSON: #"{"pad":"\#(filler)"}"#)
            largest = max(largest, files().largestJournal)
        }
        let cap = FileBudget.sharedJournalBytes(FileBudget.rowBytes(5 << 20))
        // The cap, and what this handle writes before its next look at the
        // other's file (four steps of 32 KiB) shows the directory shared.
        XCTAssertLessThanOrEqual(largest, cap + 4 * (32 << 10) + 10_300, "one journal file at most")
        XCTAssertGreaterThan(largest, cap / 2, "the journal did grow")
        for events in [first, second] { events.close(timeoutMilliseconds: 0) }
    }
}
