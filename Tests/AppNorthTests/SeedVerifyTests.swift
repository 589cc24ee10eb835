import AppNorth
import Foundation
import XCTest

/// The seed page's Verify list, items 1-4, walked in Swift through the
/// seed's own snippets (MemorySDKStorage, sendComment, retryPending)
/// against the local server; each test asserts on what the server stored.
final class SeedVerifyTests: ServerTestCase {
    /// 1. Disable connectivity and submit one queued comment: expect
    /// `false` and one pending entry.
    func testVerify1_OfflineCommentIsQueued() async throws {
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        let client = try TestServer.client()
        try TestServer.offline()
        let submitted = try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "hello", retryKey: "verify-1")
        XCTAssertFalse(submitted)
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 1)
        try TestServer.online()
        XCTAssertEqual(try TestServer.comments("swiftapi").count, 0)
    }

    /// 2. Reconnect, flush, and confirm one server comment and zero pending
    /// entries; the host's storage is left empty.
    func testVerify2_ReconnectFlushSendsOneComment() async throws {
        let storage = MemorySDKStorage()
        let queue = AppNorthOfflineQueue(storage: storage)
        let client = try TestServer.client()
        try TestServer.offline()
        let submitted = try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "hello", retryKey: "verify-2")
        XCTAssertFalse(submitted)
        let stored = try await storage.load()
        XCTAssertNotNil(stored, "the queued entry is in the host's storage")

        try TestServer.online()
        let pending = try await retryPending(queue: queue, client: client)
        XCTAssertEqual(pending, 0)
        let comments = try TestServer.comments("swiftapi")
        XCTAssertEqual(comments.count, 1)
        XCTAssertEqual(comments.first?["body"] as? String, "hello")
        let afterFlush = try await storage.load()
        XCTAssertNil(afterFlush)

        // A retried submit with the same key is applied once by the server.
        let again = try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "hello", retryKey: "verify-2")
        XCTAssertTrue(again)
        XCTAssertEqual(try TestServer.comments("swiftapi").count, 1)
    }

    /// 3. Switch accounts before flushing: the old entry is not sent as the
    /// new user; it stays pending and goes out as its own user.
    func testVerify3_SwitchedAccountDoesNotSendTheOldEntry() async throws {
        try TestServer.user("swiftapi", email: "ada@example.com", token: "ada-token")
        try TestServer.user("swiftapi", email: "bob@example.com", token: "bob-token")
        let ada = try TestServer.client(credential: AppNorthCredential(email: "Ada@Example.com", token: "ada-token"))
        let bob = try TestServer.client(credential: AppNorthCredential(email: "bob@example.com", token: "bob-token"))
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        try TestServer.offline()
        let submitted = try await sendComment(queue: queue, client: ada, ideaID: ideaID, body: "from ada", retryKey: "verify-3")
        XCTAssertFalse(submitted)
        try TestServer.online()

        let pendingAfterBob = try await retryPending(queue: queue, client: bob)
        XCTAssertEqual(pendingAfterBob, 1, "bob's flush skips ada's entry; pendingCount counts every scope")
        XCTAssertEqual(try TestServer.comments("swiftapi").count, 0)

        let pendingAfterAda = try await retryPending(queue: queue, client: ada)
        XCTAssertEqual(pendingAfterAda, 0)
        let comments = try TestServer.comments("swiftapi")
        XCTAssertEqual(comments.count, 1)
        XCTAssertEqual(comments.first?["author"] as? String, "ada@example.com")
    }

    /// 4a. Cache reads before and after TTL expiry (300 s by default, on a
    /// clock the test moves): fresh until 300 s, nil from then on.
    func testVerify4_CacheReadsBeforeAndAfterTTL() async throws {
        let clock = ManualClock()
        let cache = AppNorthReadCache(storage: MemorySDKStorage(), clock: clock)
        XCTAssertEqual(cache.ttlSeconds, 300)
        let client = try TestServer.client()
        let boards = try await client.fetchBoards().boards
        let ideas = try await client.fetchIdeas().ideas
        XCTAssertEqual(boards.map(\.name), ["Features"])
        XCTAssertEqual(ideas.map(\.title), ["Dark mode"])

        try await cache.storeBoards(boards, scope: client.scope)
        try await cache.storeIdeas(ideas, scope: client.scope)
        clock.advance(milliseconds: 299_999)
        let freshBoards = try await cache.boards(scope: client.scope)
        let freshIdeas = try await cache.ideas(scope: client.scope)
        XCTAssertEqual(freshBoards, boards)
        XCTAssertEqual(freshIdeas, ideas)
        let otherQuery = try await cache.ideas(scope: client.scope, query: IdeaQuery(search: "dark"))
        XCTAssertNil(otherQuery, "every filter is part of the key")

        clock.advance(milliseconds: 1)
        let expiredBoards = try await cache.boards(scope: client.scope)
        let expiredIdeas = try await cache.ideas(scope: client.scope)
        XCTAssertNil(expiredBoards)
        XCTAssertNil(expiredIdeas)
    }

    /// 4b. Logout removes what the app promises to forget: the cache's
    /// scope and the queue's entries, down to the host's storage.
    func testVerify4_LogoutRemovesCachedAndQueuedData() async throws {
        let cacheStorage = MemorySDKStorage()
        let queueStorage = MemorySDKStorage()
        let cache = AppNorthReadCache(storage: cacheStorage)
        let queue = AppNorthOfflineQueue(storage: queueStorage)
        let client = try TestServer.client()
        try await cache.storeBoards(try await client.fetchBoards().boards, scope: client.scope)
        try TestServer.offline()
        let submitted = try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "draft", retryKey: "verify-4")
        XCTAssertFalse(submitted)
        try TestServer.online()
        let cachedBlob = try await cacheStorage.load()
        let queuedBlob = try await queueStorage.load()
        XCTAssertNotNil(cachedBlob)
        XCTAssertNotNil(queuedBlob)

        try await cache.clear(scope: client.scope)
        let discarded = try await queue.discard(scope: nil)
        XCTAssertEqual(discarded, 1)
        let boardsAfter = try await cache.boards(scope: client.scope)
        let pendingAfter = try await queue.pendingCount()
        XCTAssertNil(boardsAfter)
        XCTAssertEqual(pendingAfter, 0)
        let cacheAfter = try await cacheStorage.load()
        let queueAfter = try await queueStorage.load()
        XCTAssertNil(cacheAfter)
        XCTAssertNil(queueAfter)
        XCTAssertEqual(try TestServer.comments("swiftapi").count, 0, "the discarded draft never reached the server")
    }
}
