import AppNorthCore
import Foundation
import Synchronization

/// A host's async storage, seen by the core as its synchronous storage.
/// The core calls it only while it runs on the library's threads
/// (`BlockingCall`), which wait for the host's async `load`/`save`.
final class HostStorage: AppNorthCore.AppNorthOfflineQueueStorage, AppNorthCore.AppNorthReadCacheStorage {
    private let loadData: @Sendable () async throws -> Data?
    private let saveData: @Sendable (Data?) async throws -> Void

    init(load: @escaping @Sendable () async throws -> Data?, save: @escaping @Sendable (Data?) async throws -> Void) {
        loadData = load
        saveData = save
    }

    func load() throws -> [UInt8]? {
        try waitForAsync(loadData).map { [UInt8]($0) }
    }

    func save(_ data: [UInt8]?) throws {
        let blob = data.map { Data($0) }
        let save = saveData
        try waitForAsync { try await save(blob) }
    }
}

/// The storage a queue or cache hands the core: the core's own for the
/// built-in storages, else a bridge to the host's. A host storage that is a
/// class or an actor is claimed by one queue or cache at a time, as the
/// core claims its own (one instance shared by both would have each
/// overwrite the other's blob).
struct StorageBinding: Sendable {
    let core: any AppNorthCore.AppNorthOfflineQueueStorage & AppNorthCore.AppNorthReadCacheStorage
    /// Set when the host's storage could not be claimed; thrown on first use.
    let claimError: AppNorthError?
    private let claimed: ObjectIdentifier?

    init(_ storage: any Sendable, role: String,
         load: @escaping @Sendable () async throws -> Data?, save: @escaping @Sendable (Data?) async throws -> Void) {
        if let builtIn = storage as? any CoreBackedStorage {
            core = builtIn.core
            claimError = nil
            claimed = nil
            return
        }
        core = HostStorage(load: load, save: save)
        guard type(of: storage) is AnyObject.Type else {
            claimError = nil
            claimed = nil
            return
        }
        let id = ObjectIdentifier(storage as AnyObject)
        let holder = Self.claims.withLock { table -> String? in
            if let current = table[id] { return current }
            table[id] = role
            return nil
        }
        if let holder {
            claimError = .wrongState("this storage is already used by \(holder); give \(role) its own storage")
            claimed = nil
        } else {
            claimError = nil
            claimed = id
        }
    }

    /// Gives the host's storage back (the queue or cache is gone).
    func release() {
        guard let claimed else { return }
        _ = Self.claims.withLock { $0.removeValue(forKey: claimed) }
    }

    private static let claims = Mutex<[ObjectIdentifier: String]>([:])
}
