import AppNorthCore
import Foundation

/// Thrown (as the seed's API has it) when a write had to be queued but the
/// queue is at its limit; nothing was added. The core reports it as
/// `AppNorthError.queueFull` (APPNORTH_E_QUEUE_FULL in the C API).
public enum AppNorthOfflineQueueError: Error, Sendable, Equatable {
    case full
}

/// Community writes that survive being offline, for Swift hosts: the core's
/// offline queue (its codec, account scoping, idempotency keys, limit and
/// ordering) behind async calls that run on the library's threads.
///
/// `submitIdea`, `submitComment` and `submitFeedback` try the request at
/// once and return `true` when it was submitted, or `false` when a network
/// failure made the queue store it. Only `AppNorthError.network` queues;
/// validation, authentication and HTTP server errors are thrown and nothing
/// is stored. A full queue (50 entries by default) throws
/// `AppNorthOfflineQueueError.full`. Votes and chat messages are not queue
/// operations.
///
/// `flush(using:)` replays the flushing client's account scope in order. A
/// network failure stops it and keeps the rest; another error is thrown and
/// leaves the failing entry pending. `pendingCount()` counts every scope.
///
/// Cancelling the calling task cancels the request in flight (see
/// `BlockingCall`): a submit cancelled mid-request is queued and returns
/// `false`; a cancelled flush throws `CancellationError` and keeps the
/// entry in flight and the rest.
///
/// The storage is loaded on first use; a storage failure is thrown there.
/// Retain one queue per account session.
public final class AppNorthOfflineQueue: Sendable {
    public static let defaultLimit = AppNorthCore.AppNorthOfflineQueue.defaultLimit

    public let limit: Int
    private let binding: StorageBinding
    private let core: LazyCore<AppNorthCore.AppNorthOfflineQueue>

    /// `limit`: 1 to 10000 (another value is thrown as
    /// `AppNorthError.invalidArgument` on first use). `clock`: for tests.
    public init(storage: any AppNorthOfflineQueueStorage, limit: Int = AppNorthOfflineQueue.defaultLimit,
                clock: any AppNorthClock = SystemClock()) {
        let binding = StorageBinding(storage, role: "an offline queue",
                                     load: { try await storage.load() }, save: { try await storage.save($0) })
        self.binding = binding
        self.limit = limit
        core = LazyCore {
            if let error = binding.claimError { throw error }
            return try AppNorthCore.AppNorthOfflineQueue(storage: binding.core, limit: limit, clock: clock)
        }
    }

    deinit { binding.release() }

    // MARK: Submitting

    public func submitIdea(using client: AppNorthClient, boardID: String, title: String, body: String = "",
                           idempotencyKey: String? = nil) async throws -> Bool {
        try await submit(.idea(boardID: boardID, title: title, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    public func submitComment(using client: AppNorthClient, handle ideaID: String, body: String,
                              idempotencyKey: String? = nil) async throws -> Bool {
        try await submit(.comment(ideaID: ideaID, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    public func submitFeedback(using client: AppNorthClient, _ feedback: AppNorthFeedback,
                               idempotencyKey: String? = nil) async throws -> Bool {
        try await submit(.feedback(feedback), using: client, idempotencyKey: idempotencyKey)
    }

    /// Any community write; `true` when submitted, `false` when queued.
    public func submit(_ write: CommunityWrite, using client: AppNorthClient,
                       idempotencyKey: String? = nil) async throws -> Bool {
        let core = self.core
        do {
            return try await BlockingCall.run(cancelling: client) {
                try core.get().submit(write, using: client, idempotencyKey: idempotencyKey)
            }
        } catch AppNorthError.queueFull {
            throw AppNorthOfflineQueueError.full
        }
    }

    // MARK: Flushing

    /// Replays this client's scope; returns how many entries were sent.
    /// Call it after reconnecting or returning to the foreground: the queue
    /// does not watch connectivity itself.
    @discardableResult
    public func flush(using client: AppNorthClient) async throws -> Int {
        let core = self.core
        return try await BlockingCall.run(cancelling: client) {
            try core.get().flush(using: client)
        }
    }

    // MARK: Inspecting and discarding

    /// Entries pending over all stored scopes.
    public func pendingCount() async throws -> Int {
        let core = self.core
        return try await BlockingCall.run { try core.get().pendingCount() }
    }

    /// The pending entries, oldest first (to find one that can never be
    /// sent: see `attempts` and `lastError`).
    public func pendingEntries() async throws -> [QueueEntry] {
        let core = self.core
        return try await BlockingCall.run { try core.get().pendingEntries() }
    }

    /// Discards one scope's entries, or every entry when `scope` is nil
    /// (logout). Returns how many.
    @discardableResult
    public func discard(scope: String?) async throws -> Int {
        let core = self.core
        return try await BlockingCall.run { try core.get().discard(scope: scope) }
    }

    /// Discards one entry by id; false when no pending entry has it.
    @discardableResult
    public func discard(entryID: String) async throws -> Bool {
        let core = self.core
        return try await BlockingCall.run { try core.get().discard(entryID: entryID) }
    }
}
