import XCTest
import Glibc
@testable import AppNorthCore

/// A flush that imports the journal a part at a time while its requests
/// are in flight (docs/events.md), seen from the host: exact stats, and a
/// revocation in the middle.
final class FlushInPartsTests: EventsTestCase {
    /// Files imported in part so far (their progress marks).
    func filesInPart() throws -> Int {
        let db = try SQLiteStore(directory: DataDirectory(path: folder))
        return try db.withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT COUNT(*) FROM kv WHERE namespace = ?", [.text(EventImporter.progressNamespace)]) { $0.int(0) }
        }.first ?? 0
    }

    func testStatsAreExactAndARevocationLeavesNothing() throws {
        let events = try open(quiet { $0.networkType = .wifi })
        for i in 0..<1000 { try events.track("p\(i)") }
        let bytes = try JSON.parse(events.statsJSON())["queued_bytes"]?.intValue
        // Every upload waits at the server: the flush stays in its first requests.
        try TestServer.post("/admin/faults", #"{"delay_ms":1000,"count":1000,"path_prefix":"/v1/apps/swift/events"}"#)
        defer { try? TestServer.delete("/admin/faults") }
        try spawn("flusher") { _ in _ = try? events.flush(timeoutMilliseconds: 60_000) }
        XCTAssertTrue(try eventually { try filesInPart() == 1 }, "the flush imports the journal in parts")
        // Until a batch is delivered nothing leaves the queue: the stats
        // count every event once, whatever part the import is at.
        var samples = 0
        while events.deliveredCount == 0 && samples < 20 {
            let stats = try JSON.parse(events.statsJSON())
            if events.deliveredCount == 0 {
                XCTAssertEqual(stats["queued"]?.intValue, 1000)
                XCTAssertEqual(stats["queued_bytes"]?.intValue, bytes)
                samples += 1
            }
            sleepMilliseconds(5)
        }
        XCTAssertGreaterThan(samples, 0)
        try events.setConsent(analytics: false)
        XCTAssertEqual(events.queuedCount, 0, "the table and the journal's rest are purged")
        for thread in threads { thread.stop() }
        threads = []
        try TestServer.delete("/admin/faults")
        try events.setConsent(analytics: true)
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 10_000), 0, "nothing more goes out")
        XCTAssertLessThanOrEqual(try serverEvents().count, 200, "at most the batches sent before the revocation")
        events.close(timeoutMilliseconds: 0)
        let again = try open(quiet())
        XCTAssertEqual(again.queuedCount, 0)
        again.close(timeoutMilliseconds: 0)
        // A request the revocation cut off may still sit in the server's
        // 1 s fault delay; it would store its events after the next test's
        // reset. The server's delay is fixed, so this waits it out.
        sleepMilliseconds(1_100)
    }
}
