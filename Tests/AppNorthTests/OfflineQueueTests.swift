import AppNorth
import Foundation
import XCTest

/// The async queue's rules beyond the Verify list, against the local server.
final class OfflineQueueTests: ServerTestCase {
    func testOnlyNetworkFailuresQueue() async throws {
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        let client = try TestServer.client()
        try TestServer.post("/admin/faults", #"{"status":503,"count":1}"#)
        do {
            _ = try await queue.submitComment(using: client, handle: ideaID, body: "x")
            XCTFail("a 503 is thrown")
        } catch AppNorthError.server(_, let status) {
            XCTAssertEqual(status, 503)
        }
        do {
            _ = try await queue.submitComment(using: client, handle: "i_999999", body: "x")
            XCTFail("a 404 is thrown")
        } catch AppNorthError.notFound {}
        do {
            _ = try await queue.submitComment(using: client, handle: ideaID, body: "   ")
            XCTFail("a blank comment is refused")
        } catch let error as AppNorthError {
            XCTAssertNotEqual(error, .network(""), "\(error)")
        }
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 0)
    }

    func testDefaultLimitIs50AndAFullQueueThrows() async throws {
        XCTAssertEqual(AppNorthOfflineQueue.defaultLimit, 50)
        XCTAssertEqual(AppNorthOfflineQueue(storage: MemorySDKStorage()).limit, 50)
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage(), limit: 1)
        let client = try TestServer.client()
        try TestServer.offline()
        let first = try await queue.submitComment(using: client, handle: ideaID, body: "one")
        XCTAssertFalse(first)
        do {
            _ = try await queue.submitComment(using: client, handle: ideaID, body: "two")
            XCTFail("the second write finds the queue full")
        } catch AppNorthOfflineQueueError.full {}
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 1)
    }

    func testIdeasAndFeedbackQueueAndFlushInOrder() async throws {
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        let client = try TestServer.client()
        let boardID = try await client.fetchBoards().boards[0].id
        try TestServer.offline()
        let idea = try await queue.submitIdea(using: client, boardID: boardID, title: "Queued idea")
        let feedback = try await queue.submitFeedback(using: client, AppNorthFeedback(text: "Queued feedback"))
        XCTAssertFalse(idea)
        XCTAssertFalse(feedback)
        let entries = try await queue.pendingEntries()
        XCTAssertEqual(entries.map(\.kind), ["idea", "feedback"])
        try TestServer.online()
        let sent = try await queue.flush(using: client)
        XCTAssertEqual(sent, 2)
        let titles = try await client.fetchIdeas().ideas.map(\.title)
        XCTAssertEqual(titles, ["Dark mode", "Queued idea"])
        let feedbackRows = (try TestServer.get("/admin/apps/swiftapi/state"))["feedback"] as? [[String: Any]] ?? []
        XCTAssertEqual(feedbackRows.map { $0["text"] as? String }, ["Queued feedback"])
    }

    /// The built-in SQLite storage keeps queued entries for the next queue
    /// on the same directory and name (the next launch).
    func testSQLiteStorageKeepsEntriesAcrossQueues() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("appnorth-swiftapi-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let client = try TestServer.client()
        try TestServer.offline()
        let first = AppNorthOfflineQueue(storage: try AppNorthSQLiteStorage(directory: directory, name: "queue"))
        let submitted = try await first.submitComment(using: client, handle: ideaID, body: "persisted")
        XCTAssertFalse(submitted)
        try TestServer.online()

        let next = AppNorthOfflineQueue(storage: try AppNorthSQLiteStorage(directory: directory, name: "queue"))
        let pending = try await next.pendingCount()
        XCTAssertEqual(pending, 1)
        let sent = try await next.flush(using: client)
        XCTAssertEqual(sent, 1)
        XCTAssertEqual(try TestServer.comments("swiftapi").map { $0["body"] as? String }, ["persisted"])
    }

    func testMemoryStorageIsOfferedThroughTheProtocols() async throws {
        let storage = AppNorthMemoryStorage()
        let queue = AppNorthOfflineQueue(storage: storage)
        let client = try TestServer.client()
        try TestServer.offline()
        let submitted = try await queue.submitComment(using: client, handle: ideaID, body: "in memory")
        XCTAssertFalse(submitted)
        let blob = try await storage.load()
        XCTAssertNotNil(blob)
    }

    /// One storage instance for a queue and a cache is refused on first
    /// use; the first user keeps it.
    func testOneStorageForQueueAndCacheIsRefused() async throws {
        for storage in [MemorySDKStorage() as any AppNorthOfflineQueueStorage & AppNorthReadCacheStorage, AppNorthMemoryStorage()] {
            let queue = AppNorthOfflineQueue(storage: storage)
            let cache = AppNorthReadCache(storage: storage)
            let pending = try await queue.pendingCount()
            XCTAssertEqual(pending, 0)
            do {
                _ = try await cache.boards(scope: "s")
                XCTFail("the second user of one storage is refused")
            } catch AppNorthError.wrongState {}
        }
    }

    /// A host storage that fails: the failure is thrown on first use, as
    /// `AppNorthError.storage`, and the load is tried again on the next.
    func testStorageFailureSurfacesOnFirstUse() async throws {
        let storage = FlakyStorage()
        let queue = AppNorthOfflineQueue(storage: storage)
        let cache = AppNorthReadCache(storage: FlakyStorage(failing: true))
        await storage.setFailing(true)
        do {
            _ = try await queue.pendingCount()
            XCTFail("the load failure is thrown")
        } catch AppNorthError.storage {}
        do {
            _ = try await cache.boards(scope: "s")
            XCTFail("the load failure is thrown")
        } catch AppNorthError.storage {}
        await storage.setFailing(false)
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 0)
    }

    /// A stored blob that is not a queue is refused, not read as empty.
    func testForeignBlobIsRefused() async throws {
        let storage = MemorySDKStorage()
        try await storage.save(Data(#"{"format":"something-else","version":1}"#.utf8))
        let queue = AppNorthOfflineQueue(storage: storage)
        do {
            _ = try await queue.pendingCount()
            XCTFail("a foreign blob is refused")
        } catch AppNorthError.storage {}
        let kept = try await storage.load()
        XCTAssertNotNil(kept, "nothing was overwritten")
    }

    func testInvalidLimitIsThrownOnFirstUse() async throws {
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage(), limit: 0)
        do {
            _ = try await queue.pendingCount()
            XCTFail("limit 0 is refused")
        } catch AppNorthError.invalidArgument {}
    }
}

/// A host storage that can be told to fail.
actor FlakyStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage {
    private var data: Data?
    private var failing: Bool

    init(failing: Bool = false) { self.failing = failing }

    func setFailing(_ value: Bool) { failing = value }

    func load() async throws -> Data? {
        if failing { throw FlakyStorageError.unavailable }
        return data
    }

    func save(_ data: Data?) async throws {
        if failing { throw FlakyStorageError.unavailable }
        self.data = data
    }
}

enum FlakyStorageError: Error { case unavailable }
