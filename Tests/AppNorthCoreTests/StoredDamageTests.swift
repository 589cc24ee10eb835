import XCTest
import Glibc
@testable import AppNorthCore

/// Stored queue and cache entries found damaged are dropped with a warning
/// naming what went (never the content), once per finding, and counted.
final class StoredDamageTests: XCTestCase {
    final class Lines: @unchecked Sendable {
        private let lock = Lock<[String]>([], level: LockClass.test)
        var all: [String] { lock.withLock { $0 } }
        var logger: Logger { Logger(minimum: .debug) { [self] level, message in lock.withLock { $0.append("\(level.name) \(message)") } } }
    }

    let queueBlob = #"{"format":"appnorth.offline-queue","version":1,"entries":["#
        + #"{"id":"good","scope":"s","kind":"feedback","path":"/feedback","body":"{}","idempotency_key":"k1","created_ms":1},"#
        + #"{"id":"broken","scope":"s","kind":"feedback","path":"/feedback","body":"secret text","idempotency_key":"k2","created_ms":1},"#
        + #"7]}"#

    func testADamagedQueueEntryIsLoggedAndCounted() throws {
        let storage = MemoryStorage()
        try storage.save(Array(queueBlob.utf8))
        let lines = Lines()
        let queue = try AppNorthOfflineQueue(storage: storage, logger: lines.logger)
        XCTAssertEqual(try queue.pendingEntries().map(\.id), ["good"])
        XCTAssertEqual(lines.all, ["WARNING offline queue: dropped 2 damaged stored entries (id broken, no id)"])
        XCTAssertFalse(lines.all.joined().contains("secret"), "content never reaches the log")
        XCTAssertEqual(queue.damagedDropped, 2)
    }

    /// On shared SQLite storage every read decodes the blob again: the same
    /// damage is reported once, and a write removes it for good.
    func testSharedStorageReportsTheSameDamageOnce() throws {
        let folder = "/tmp/appnorth-damage-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        let storage = try SQLiteBlobStorage(store: SQLiteStore(directory: DataDirectory(path: folder)), name: "queue")
        try storage.save(Array(queueBlob.utf8))
        let lines = Lines()
        let queue = try AppNorthOfflineQueue(storage: storage, logger: lines.logger)
        for _ in 0..<3 { XCTAssertEqual(try queue.pendingCount(), 1) }
        XCTAssertEqual(lines.all.count, 1, "\(lines.all)")
        XCTAssertEqual(try queue.discard(scope: "other"), 0)  // a write: the damaged entries are not written back
        XCTAssertFalse(String(decoding: try storage.load() ?? [], as: UTF8.self).contains("broken"))
        XCTAssertEqual(queue.damagedDropped, 2)
    }

    func testDamagedCacheEntriesAndAnUnreadableCacheAreLogged() throws {
        let good = #"{"kind":"boards","scope":"s","query":"","value":"[]","stored_ms":1}"#
        let bad = #"{"kind":"ideas","scope":"s","query":"","value":"{\"not\":\"an array\"}","stored_ms":1}"#
        let storage = MemoryStorage()
        try storage.save(Array((#"{"format":"appnorth.read-cache","version":1,"entries":["# + good + "," + bad + "]}").utf8))
        let lines = Lines()
        let cache = try AppNorthReadCache(storage: storage, logger: lines.logger)
        XCTAssertEqual(lines.all, ["WARNING read cache: dropped 1 damaged stored entry (a ideas entry)"])
        XCTAssertEqual(cache.damagedDropped, 1)

        let unreadable = MemoryStorage()
        try unreadable.save(Array("{not json".utf8))
        let more = Lines()
        let empty = try AppNorthReadCache(storage: unreadable, logger: more.logger)
        XCTAssertNil(empty.boards(scope: "s"))
        XCTAssertEqual(more.all, ["WARNING read cache: dropped the stored read cache: it is not valid JSON (9 bytes)"])
        XCTAssertEqual(empty.damagedDropped, 1)
    }
}
