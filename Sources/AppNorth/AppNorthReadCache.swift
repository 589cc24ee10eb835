import AppNorthCore
import Foundation

/// A TTL cache of board and idea arrays for Swift hosts, 300 s by default:
/// the core's read cache (its keys, TTL check and stored format) with typed
/// values, behind async calls.
///
/// Expired entries read as `nil`; there is no stale fallback. Keys are a
/// scope (`AppNorthClient.scope`: server, app and account) plus, for ideas,
/// every filter and the search query of an `IdeaQuery`; only first pages
/// are cached, never cursors, chat messages or report threads.
/// `clear(scope:)` removes a scope's boards and ideas.
///
/// Built without `try`: the storage is loaded on first use, and a storage
/// failure is thrown there (and the load tried again on the next use).
public final class AppNorthReadCache: Sendable {
    public static let defaultTTLSeconds = AppNorthCore.AppNorthReadCache.defaultTTLSeconds

    public let ttlSeconds: Int
    private let binding: StorageBinding
    private let core: LazyCore<AppNorthCore.AppNorthReadCache>

    /// `ttlSeconds`: 1 to 31536000 (another value is thrown as
    /// `AppNorthError.invalidArgument` on first use). `clock`: for tests
    /// (`ManualClock`) and hosts that drive time themselves.
    public init(storage: any AppNorthReadCacheStorage, ttlSeconds: Int = AppNorthReadCache.defaultTTLSeconds,
                clock: any AppNorthClock = SystemClock()) {
        let binding = StorageBinding(storage, role: "a read cache",
                                     load: { try await storage.load() }, save: { try await storage.save($0) })
        self.binding = binding
        self.ttlSeconds = ttlSeconds
        core = LazyCore {
            if let error = binding.claimError { throw error }
            return try AppNorthCore.AppNorthReadCache(storage: binding.core, ttlSeconds: ttlSeconds, clock: clock)
        }
    }

    deinit { binding.release() }

    // MARK: Reading

    /// The fresh boards for a scope, or nil. A cached value that no longer
    /// decodes reads as nil: the cache is rebuilt from the network.
    public func boards(scope: String) async throws -> [Board]? {
        try await read { $0.boards(scope: scope) }
    }

    /// The fresh first page of ideas for a scope and query, or nil (always
    /// nil for a query with a cursor).
    public func ideas(scope: String, query: IdeaQuery = IdeaQuery()) async throws -> [Idea]? {
        try await read { $0.ideas(scope: scope, query: query) }
    }

    // MARK: Storing

    public func storeBoards(_ boards: [Board], scope: String) async throws {
        let json = try ModelCoding.encode(boards)
        try await change { try $0.storeBoards(json, scope: scope) }
    }

    /// Stores the first page of ideas for a query (a query with a cursor is
    /// refused).
    public func storeIdeas(_ ideas: [Idea], scope: String, query: IdeaQuery = IdeaQuery()) async throws {
        let json = try ModelCoding.encode(ideas)
        try await change { try $0.storeIdeas(json, scope: scope, query: query) }
    }

    /// Removes a scope's boards and ideas (for logout).
    public func clear(scope: String) async throws {
        try await change { try $0.clear(scope: scope) }
    }

    // MARK: -

    /// Reads from memory once open; only the first use waits for storage.
    private func read<T: Decodable & Sendable>(_ lookup: @escaping @Sendable (AppNorthCore.AppNorthReadCache) -> String?) async throws -> T? {
        let text: String?
        if let open = core.current {
            text = lookup(open)
        } else {
            let core = self.core
            text = try await BlockingCall.run { lookup(try core.get()) }
        }
        guard let text else { return nil }
        return try? ModelCoding.decode(T.self, from: text, what: "a cached value")
    }

    private func change(_ body: @escaping @Sendable (AppNorthCore.AppNorthReadCache) throws -> Void) async throws {
        let core = self.core
        try await BlockingCall.run { try body(core.get()) }
    }
}
