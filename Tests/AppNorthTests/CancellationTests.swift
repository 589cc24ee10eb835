import AppNorth
import Synchronization
import Foundation
import XCTest

/// Task cancellation ends the request in flight (the server holds it for
/// 20 s; each test waits until the server has it, then cancels), and the
/// library's blocking calls never occupy the cooperative pool.
final class CancellationTests: ServerTestCase {
    /// A client whose own timeout is far beyond the hold: only the cancel
    /// can end the request early.
    func heldClient() throws -> AppNorthClient {
        try TestServer.client(timeoutMs: 60_000)
    }

    func testCancelledReadEndsPromptlyWithCancellationError() async throws {
        let client = try heldClient()
        try TestServer.hold("/v1/apps/swiftapi/boards")
        let read = Task { try await client.fetchBoards() }
        try await TestServer.waitUntilFaultsTaken()
        read.cancel()
        do {
            _ = try await read.value
            XCTFail("the held read was not cancelled")
        } catch is CancellationError {}
        // The server holds the read until the next test's reset: only the
        // cancel can have ended it.
        XCTAssertEqual(try TestServer.held(), 1, "the cancel ended the read while the server still held it")
        let boards = try await client.fetchBoards().boards
        XCTAssertEqual(boards.count, 1, "later calls on the client run normally")
    }

    /// Per-operation cancel: cancelling one task ends its request alone.
    /// The other task's request is held by the server too (1.5 s) when the
    /// cancel happens, and still succeeds (a client-wide cancel ended both).
    func testCancellingOneTaskLeavesTheOthersOnTheClient() async throws {
        let client = try heldClient()
        try TestServer.hold("/v1/apps/swiftapi/boards")
        _ = try TestServer.post("/admin/faults",
                            #"{"delay_ms":1500,"count":1,"path_prefix":"/v1/apps/swiftapi/ideas/\#(ideaID)/comments"}"#)
        let ideaID = self.ideaID
        let cancelled = Task { try await client.fetchBoards() }
        let other = Task { try await client.fetchComments(ideaID: ideaID) }
        try await TestServer.waitUntilFaultsTaken()
        cancelled.cancel()
        do {
            _ = try await cancelled.value
            XCTFail("the held read was not cancelled")
        } catch is CancellationError {}
        let comments = try await other.value
        XCTAssertEqual(comments.comments.count, 0, "the other task's read completed normally")
    }

    func testCancelledSubmitStaysQueued() async throws {
        let client = try heldClient()
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        try TestServer.hold("/v1/apps/swiftapi/ideas")
        let ideaID = self.ideaID
        let submit = Task {
            try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "held", retryKey: "cancel-1")
        }
        try await TestServer.waitUntilFaultsTaken()
        submit.cancel()
        let submitted = try await submit.value
        XCTAssertFalse(submitted, "a submit cancelled mid-request is queued")
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 1)

        let left = try await retryPending(queue: queue, client: client)
        XCTAssertEqual(left, 0)
        let comments = try TestServer.comments("swiftapi")
        XCTAssertEqual(comments.map { $0["body"] as? String }, ["held"])
    }

    func testCancelledFlushKeepsTheEntry() async throws {
        let client = try heldClient()
        let queue = AppNorthOfflineQueue(storage: MemorySDKStorage())
        try TestServer.offline()
        let submitted = try await sendComment(queue: queue, client: client, ideaID: ideaID, body: "later", retryKey: "cancel-2")
        XCTAssertFalse(submitted)
        try TestServer.online()

        try TestServer.hold("/v1/apps/swiftapi/ideas")
        let flush = Task { try await retryPending(queue: queue, client: client) }
        try await TestServer.waitUntilFaultsTaken()
        flush.cancel()
        do {
            _ = try await flush.value
            XCTFail("the held flush was not cancelled")
        } catch is CancellationError {}
        let pending = try await queue.pendingCount()
        XCTAssertEqual(pending, 1, "the entry in flight stays queued")

        let left = try await retryPending(queue: queue, client: client)
        XCTAssertEqual(left, 0)
        let comments = try TestServer.comments("swiftapi")
        XCTAssertEqual(comments.map { $0["body"] as? String }, ["later"])
    }

    /// A task cancelled before the call starts sends nothing.
    func testAlreadyCancelledTaskSendsNothing() async throws {
        let client = try TestServer.client()
        try TestServer.delete("/admin/requests")
        let read = Task {
            while !Task.isCancelled { await Task.yield() }
            return try await client.fetchBoards()
        }
        read.cancel()
        do {
            _ = try await read.value
            XCTFail("a cancelled task's read ran")
        } catch is CancellationError {}
        let requests = (try TestServer.get("/admin/requests"))["requests"] as? [Any] ?? []
        XCTAssertEqual(requests.count, 0)
    }

    /// More held calls than the cooperative pool has threads: if they
    /// blocked pool threads, no other task could run until the holds end.
    /// Another task runs and finishes while every call is still held.
    func testHeldCallsDoNotOccupyTheCooperativePool() async throws {
        let client = try heldClient()
        let calls = max(8, ProcessInfo.processInfo.activeProcessorCount * 2)
        try TestServer.hold("/v1/apps/swiftapi/boards", count: calls)
        let finished = ManagedCounter()
        let reads = (0..<calls).map { _ in
            Task.detached {
                defer { finished.increment() }
                return try await client.fetchBoards()
            }
        }
        try await TestServer.waitUntilFaultsTaken()
        let other = await Task.detached { (1...1000).reduce(0, +) }.value
        XCTAssertEqual(other, 500_500)
        XCTAssertEqual(finished.value, 0, "every call was still held while another task ran")
        for read in reads { read.cancel() }
        for read in reads {
            do {
                _ = try await read.value
            } catch is CancellationError {
            } catch AppNorthError.cancelled {
                // Another read's cancel ended it: the client cancel ends
                // every request in flight on the client.
            }
        }
        XCTAssertEqual(finished.value, calls)
    }
}

/// A counter several tasks bump.
final class ManagedCounter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
