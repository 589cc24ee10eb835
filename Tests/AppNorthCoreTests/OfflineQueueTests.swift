import XCTest
import Dispatch
@testable import AppNorthCore

/// The seed's offline-queue rules, one test per rule, against the real server.
final class OfflineQueueTests: XCTestCase {
    var ideaID = ""

    override func setUp() async throws {
        try TestServer.reset()
        let board = try TestServer.board("swift", "Features")
        try TestServer.idea("swift", board: board, title: "Dark mode")
        let ideas = try JSON.parse(try TestServer.client().listIdeas())
        ideaID = ideas["ideas"]?.arrayElements.first?["id"]?.stringValue ?? ""
    }


    func serverComments() throws -> [JSON] {
        try TestServer.get("/admin/apps/swift/state")["comments"]?.arrayElements ?? []
    }

    /// A damaged entry is dropped, the rest kept; a damaged creation time
    /// is clamped into the stored range.
    func testDamagedEntriesAreDroppedOnLoad() throws {
        func entry(_ id: String, path: String = "/feedback", body: String = #""{}""#, created: String = "1") -> String {
            #"{"id":"\#(id)","scope":"s","kind":"feedback","path":"\#(path)","body":\#(body),"idempotency_key":"k\#(id)","created_ms":\#(created)}"#
        }
        let entries = [entry("good"), entry("min", created: "-9223372036854775808"), entry("max", created: "9223372036854775807"),
                       entry("body", body: #""not json""#), entry("number", body: "5"), entry("url", path: "http://x/y"),
                       entry("slashes", path: "//x/y"), entry("created", created: #""soon""#), "7", "null"]
        let blob = #"{"format":"appnorth.offline-queue","version":1,"entries":["# + entries.joined(separator: ",") + "]}"
        let decoded = try QueueCodec.decode(Array(blob.utf8))
        XCTAssertEqual(decoded.map(\.id), ["good", "min", "max"])
        XCTAssertEqual(decoded.map(\.createdMs), [1, StoredWallTime.range.lowerBound, StoredWallTime.range.upperBound])
        XCTAssertThrowsError(try QueueCodec.decode(Array("garbage".utf8)), "a blob it cannot read is still refused")
    }

    func testVerify1_OfflineSubmitReturnsFalseAndQueuesOne() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let submitted = try TestServer.offline {
            try queue.submitComment(using: try TestServer.client(), handle: ideaID, body: "hello", idempotencyKey: "k1")
        }
        XCTAssertFalse(submitted)
        XCTAssertEqual(try queue.pendingCount(), 1)
        XCTAssertEqual(try serverComments().count, 0)
    }

    /// Cancels `client` once the server holds the request it delays.
    func cancelWhenHeld(_ client: AppNorthClient) -> Thread {
        let thread = Thread {
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline,
                  (try? TestServer.get("/admin/faults"))?["faults"]?.arrayElements.isEmpty == false {
                Thread.sleep(forTimeInterval: 0.02)
            }
            Thread.sleep(forTimeInterval: 0.1)
            client.cancelInFlight()
        }
        thread.start()
        return thread
    }

    /// A cancelled submit is queued like a network failure; a cancelled
    /// flush throws `.cancelled`, names no failed entry and keeps it; the
    /// next flush sends it once (same idempotency key).
    func testCancelledSubmitIsQueuedAndCancelledFlushKeepsTheEntry() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000))
        let held = #"{"delay_ms":20000,"count":1,"path_prefix":"/v1/apps/swift/ideas"}"#
        try TestServer.post("/admin/faults", held)
        _ = cancelWhenHeld(client)
        XCTAssertFalse(try queue.submitComment(using: client, handle: ideaID, body: "cancelled", idempotencyKey: "kc"))
        XCTAssertEqual(try queue.pendingCount(), 1)

        try TestServer.post("/admin/faults", held)
        _ = cancelWhenHeld(client)
        var sent = -1
        var failed: String? = "unset"
        XCTAssertThrowsError(try queue.flush(using: client, sentCount: &sent, failedEntryID: &failed)) {
            guard case AppNorthError.cancelled = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(sent, 0)
        XCTAssertNil(failed)
        XCTAssertEqual(try queue.pendingCount(), 1)
        XCTAssertEqual(try queue.flush(using: client), 1)
        XCTAssertEqual(try serverComments().filter { $0["body"]?.stringValue == "cancelled" }.count, 1)
    }

    func testVerify2_FlushAfterReconnectSendsOnceAndEmpties() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        try TestServer.offline {
            XCTAssertFalse(try queue.submitComment(using: client, handle: ideaID, body: "hello", idempotencyKey: "k2"))
        }
        XCTAssertEqual(try queue.flush(using: client), 1)
        XCTAssertEqual(try queue.pendingCount(), 0)
        let comments = try serverComments()
        XCTAssertEqual(comments.count, 1)
        XCTAssertEqual(comments.first?["body"]?.stringValue, "hello")
    }

    func testVerify3_AnotherAccountNeverSendsTheOldEntry() throws {
        try TestServer.post("/admin/users", #"{"app":"swift","email":"ada@example.com","token":"a"}"#)
        try TestServer.post("/admin/users", #"{"app":"swift","email":"bob@example.com","token":"b"}"#)
        let ada = try TestServer.client(credential: AppNorthCredential(email: "Ada@Example.com", token: "a"))
        let bob = try TestServer.client(credential: AppNorthCredential(email: "bob@example.com", token: "b"))
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        try TestServer.offline {
            XCTAssertFalse(try queue.submitComment(using: ada, handle: ideaID, body: "from ada"))
        }

        XCTAssertEqual(try queue.flush(using: bob), 0, "bob's flush skips ada's entry")
        XCTAssertEqual(try serverComments().count, 0)
        XCTAssertEqual(try queue.pendingCount(), 1, "pendingCount counts every scope")

        XCTAssertEqual(try queue.flush(using: ada), 1)
        XCTAssertEqual(try serverComments().first?["author"]?.stringValue, "ada@example.com")
    }

    func testOnlyNetworkFailuresQueue() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        try TestServer.post("/admin/faults", #"{"status":503,"count":1}"#)
        XCTAssertThrowsError(try queue.submitComment(using: client, handle: ideaID, body: "x")) {
            guard case AppNorthError.server(_, 503) = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try queue.submitComment(using: client, handle: "i_missing", body: "x")) {
            guard case AppNorthError.notFound = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try queue.submitComment(using: client, handle: ideaID, body: "   ")) {
            guard case AppNorthError.validation = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try queue.pendingCount(), 0)
    }

    func testFullQueueThrowsFullAndKeepsWhatItHas() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage(), limit: 2)
        let client = try TestServer.client()
        for i in 0..<2 {
            try TestServer.offline {
                XCTAssertFalse(try queue.submitComment(using: client, handle: ideaID, body: "c\(i)"))
            }
        }
        try TestServer.offline {
            XCTAssertThrowsError(try queue.submitComment(using: client, handle: ideaID, body: "c3")) {
                XCTAssertEqual($0 as? AppNorthError, .queueFull("the offline queue is full; nothing was added"))
            }
        }
        XCTAssertEqual(try queue.pendingCount(), 2)
        XCTAssertEqual(AppNorthOfflineQueue.defaultLimit, 50)
    }

    func testFlushStopsAtTheFirstNetworkFailureAndKeepsTheRest() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        for i in 0..<3 {
            try TestServer.offline {
                _ = try queue.submitComment(using: client, handle: ideaID, body: "c\(i)")
            }
        }
        try TestServer.offline {
            XCTAssertEqual(try queue.flush(using: client), 0)
        }
        XCTAssertEqual(try queue.pendingCount(), 3)
        XCTAssertEqual(try queue.flush(using: client), 3)
        XCTAssertEqual(try serverComments().compactMap { $0["body"]?.stringValue }, ["c0", "c1", "c2"], "replayed in order")
    }

    func testFlushErrorLeavesTheFailingEntryPending() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        for i in 0..<2 {
            try TestServer.offline {
                _ = try queue.submitComment(using: client, handle: ideaID, body: "c\(i)")
            }
        }
        try TestServer.post("/admin/faults", #"{"status":500,"count":1}"#)
        XCTAssertThrowsError(try queue.flush(using: client)) {
            guard case AppNorthError.server = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try queue.pendingCount(), 2)
    }

    func testReplayUsesTheOriginalKeySoTheServerAppliesItOnce() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        try TestServer.offline {
            _ = try queue.submitComment(using: client, handle: ideaID, body: "once", idempotencyKey: "same-key")
        }
        // As if a previous process sent it and was killed before removing it.
        try client.submitComment(handle: ideaID, body: "once", idempotencyKey: "same-key")
        XCTAssertEqual(try queue.flush(using: client), 1)
        XCTAssertEqual(try serverComments().count, 1)
    }

    func testEntriesSurviveARestartAndNeverHoldTheToken() throws {
        let folder = "/tmp/appnorth-queue-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        try TestServer.post("/admin/users", #"{"app":"swift","email":"ada@example.com","token":"secret-token-123"}"#)
        let ada = try TestServer.client(credential: AppNorthCredential(email: "ada@example.com", token: "secret-token-123"))
        do {
            let store = try SQLiteStore(directory: DataDirectory(path: folder))
            let queue = try AppNorthOfflineQueue(storage: try SQLiteBlobStorage(store: store, name: "queue"))
            try TestServer.offline {
                XCTAssertFalse(try queue.submitComment(using: ada, handle: ideaID, body: "persisted"))
            }
        }
        let store = try SQLiteStore(directory: DataDirectory(path: folder))
        let storage = try SQLiteBlobStorage(store: store, name: "queue")
        let blob = String(decoding: try storage.load() ?? [], as: UTF8.self)
        XCTAssertFalse(blob.contains("secret-token-123"), "the token is never stored")
        XCTAssertTrue(blob.contains("ada@example.com"), "the scope is")
        let reopened = try AppNorthOfflineQueue(storage: storage)
        XCTAssertEqual(try reopened.pendingCount(), 1)
        XCTAssertEqual(try reopened.flush(using: ada), 1)
    }

    /// Issue 10: two queues on one SQLite name (two handles, as two
    /// processes would have) each keep every acknowledged write.
    func testTwoQueuesOnOneSQLiteNameLoseNoWrite() throws {
        let folder = "/tmp/appnorth-queue-\(getpid())-\(Random.hexToken(bytes: 4))"
        defer { _ = system("rm -rf '\(folder)'") }
        let directory = try DataDirectory(path: folder)
        let first = try AppNorthOfflineQueue(storage: try SQLiteBlobStorage(store: try SQLiteStore(directory: directory), name: "queue"))
        let second = try AppNorthOfflineQueue(storage: try SQLiteBlobStorage(store: try SQLiteStore(directory: directory), name: "queue"))
        let client = try TestServer.client()
        let ideaID = ideaID
        try TestServer.offline {
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let queue = index == 0 ? first : second
                for n in 0..<5 {
                    XCTAssertEqual(try? queue.submitComment(using: client, handle: ideaID, body: "q\(index)-\(n)"), false)
                }
            }
        }
        XCTAssertEqual(try first.pendingCount(), 10)
        XCTAssertEqual(try second.pendingCount(), 10)
        XCTAssertEqual(try first.flush(using: client), 10)
        XCTAssertEqual(try second.pendingCount(), 0, "the other handle sees the flush")
        XCTAssertEqual(try second.flush(using: client), 0)
        XCTAssertEqual(Set(try serverComments().compactMap { $0["body"]?.stringValue }).count, 10)
    }

    /// Issue 10: an entry the server refuses for good (its idea deleted)
    /// stays pending and is named by the flush; discarding it alone lets
    /// the valid writes behind it go out.
    func testPoisonEntryIsNamedAndDiscardedAlone() throws {
        let board = try TestServer.board("swift", "Doomed")
        try TestServer.idea("swift", board: board, title: "Soon deleted")
        let doomed = try JSON.parse(try TestServer.client().listIdeas())["ideas"]?.arrayElements
            .first { $0["title"]?.stringValue == "Soon deleted" }?["id"]?.stringValue ?? ""
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let client = try TestServer.client()
        try TestServer.offline {
            XCTAssertFalse(try queue.submitComment(using: client, handle: doomed, body: "poison"))
            XCTAssertFalse(try queue.submitComment(using: client, handle: ideaID, body: "valid 1"))
            XCTAssertFalse(try queue.submitComment(using: client, handle: ideaID, body: "valid 2"))
        }
        try TestServer.delete("/admin/apps/swift/ideas/\(doomed)")
        let poisonID = try queue.pendingEntries()[0].id
        XCTAssertEqual(try queue.pendingEntries()[0].attempts, 1, "the try at submit counts")
        for round in 2...3 {
            var sent = -1
            var failed: String?
            XCTAssertThrowsError(try queue.flush(using: client, sentCount: &sent, failedEntryID: &failed)) {
                guard case AppNorthError.notFound = $0 else { return XCTFail("\($0)") }
            }
            XCTAssertEqual(sent, 0)
            XCTAssertEqual(failed, poisonID)
            let entry = try queue.pendingEntries()[0]
            XCTAssertEqual(entry.attempts, round)
            XCTAssertTrue(entry.lastError?.contains("not found") ?? false, entry.lastError ?? "nil")
        }
        XCTAssertEqual(try queue.pendingCount(), 3, "the seed's rule: it stays pending")
        XCTAssertTrue(try queue.discard(entryID: poisonID))
        XCTAssertFalse(try queue.discard(entryID: poisonID), "already gone")
        var sent = 0
        var failed: String? = "unset"
        try queue.flush(using: client, sentCount: &sent, failedEntryID: &failed)
        XCTAssertEqual(sent, 2)
        XCTAssertNil(failed)
        XCTAssertEqual(try serverComments().compactMap { $0["body"]?.stringValue }, ["valid 1", "valid 2"])
    }

    func testDiscardPerScopeAndInTotal() throws {
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        let anonymous = try TestServer.client()
        for _ in 0..<2 {
            try TestServer.offline {
                _ = try queue.submitComment(using: anonymous, handle: ideaID, body: "x")
            }
        }
        XCTAssertEqual(try queue.discard(scope: "http://other|swift|anonymous"), 0)
        XCTAssertEqual(try queue.discard(scope: anonymous.scope), 2)
        try TestServer.offline {
            _ = try queue.submitComment(using: anonymous, handle: ideaID, body: "x")
        }
        XCTAssertEqual(try queue.discard(scope: nil), 1)
        XCTAssertEqual(try queue.pendingCount(), 0)
    }

    func testErasingStorageDoesNotClearALoadedQueue() throws {
        let storage = MemoryStorage()
        let queue = try AppNorthOfflineQueue(storage: storage)
        try TestServer.offline {
            _ = try queue.submitComment(using: try TestServer.client(), handle: ideaID, body: "x")
        }
        try storage.save(nil)
        XCTAssertEqual(try queue.pendingCount(), 1, "documented: the loaded entries stay")
    }

    func testOneStorageCannotServeAQueueAndACache() throws {
        let storage = MemoryStorage()
        let queue = try AppNorthOfflineQueue(storage: storage)
        XCTAssertThrowsError(try AppNorthReadCache(storage: storage)) {
            guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
        }
        _ = queue
    }

    func testAQueueRefusesACacheBlob() throws {
        let storage = MemoryStorage()
        try storage.save(CacheCodec.encode([]))
        XCTAssertThrowsError(try AppNorthOfflineQueue(storage: storage)) {
            guard case AppNorthError.storage(let message) = $0 else { return XCTFail("\($0)") }
            XCTAssertTrue(message.contains("does not hold an offline queue"), message)
        }
        XCTAssertEqual(try storage.load().map { String(decoding: $0, as: UTF8.self).contains("read-cache") }, true,
                       "the foreign blob is left as it was")
    }

    func testAFailingSaveKeepsMemoryAndStorageEqual() throws {
        final class FailingStorage: AppNorthOfflineQueueStorage, @unchecked Sendable {
            var fail = false
            var data: [UInt8]?
            func load() throws -> [UInt8]? { data }
            func save(_ d: [UInt8]?) throws {
                if fail { throw AppNorthError.storage("disk full") }
                data = d
            }
        }
        let storage = FailingStorage()
        let queue = try AppNorthOfflineQueue(storage: storage)
        storage.fail = true
        try TestServer.offline {
            XCTAssertThrowsError(try queue.submitComment(using: try TestServer.client(), handle: ideaID, body: "x")) {
                guard case AppNorthError.storage = $0 else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(try queue.pendingCount(), 0)
    }

    func testAStorageCallbackCallingBackIntoTheQueueFailsInsteadOfDeadlocking() throws {
        final class ReentrantStorage: AppNorthOfflineQueueStorage, @unchecked Sendable {
            weak var queue: AppNorthOfflineQueue?
            var reentryError: Error?
            func load() throws -> [UInt8]? { nil }
            func save(_ d: [UInt8]?) throws {
                do { _ = try queue?.discard(scope: nil) } catch { reentryError = error }
            }
        }
        let storage = ReentrantStorage()
        let queue = try AppNorthOfflineQueue(storage: storage)
        storage.queue = queue
        try TestServer.offline {
            _ = try queue.submitComment(using: try TestServer.client(), handle: ideaID, body: "x")
        }
        guard case AppNorthError.wrongState? = storage.reentryError as? AppNorthError else {
            return XCTFail("expected wrongState, got \(String(describing: storage.reentryError))")
        }
    }
}
