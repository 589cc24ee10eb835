import AppNorthCore
import Foundation

/// The core's own storages, offered through the async protocols. A queue or
/// cache given one of these uses the core storage directly (on the
/// library's threads), so the SQLite storage keeps its atomic updates
/// across handles and processes.
protocol CoreBackedStorage: Sendable {
    var core: any AppNorthCore.AppNorthOfflineQueueStorage & AppNorthCore.AppNorthReadCacheStorage { get }
}

/// Storage in memory only.
public final class AppNorthMemoryStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage, CoreBackedStorage {
    let core: any AppNorthCore.AppNorthOfflineQueueStorage & AppNorthCore.AppNorthReadCacheStorage = MemoryStorage()

    public init() {}

    public func load() async throws -> Data? {
        try core.load().map { Data($0) }
    }

    public func save(_ data: Data?) async throws {
        try core.save(data.map { [UInt8]($0) })
    }
}

/// Storage as one named row of the SQLite database in a data directory
/// (created 0700 if missing, files 0600). Several instances, in one process
/// or several, may use the same directory and name: each change is one
/// write transaction on the stored blob.
public final class AppNorthSQLiteStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage, CoreBackedStorage {
    let core: any AppNorthCore.AppNorthOfflineQueueStorage & AppNorthCore.AppNorthReadCacheStorage

    /// `name`: 1 to 64 characters of A-Z a-z 0-9 . _ -. Opens (and creates)
    /// the database at once, on the calling thread.
    public init(directory: String, name: String, clock: any AppNorthClock = SystemClock()) throws {
        let store = try SQLiteStore(directory: try DataDirectory(path: directory))
        core = try SQLiteBlobStorage(store: store, name: name, clock: clock)
    }

    public func load() async throws -> Data? {
        let core = self.core
        return try await BlockingCall.run { try core.load().map { Data($0) } }
    }

    public func save(_ data: Data?) async throws {
        let core = self.core
        try await BlockingCall.run { try core.save(data.map { [UInt8]($0) }) }
    }
}
