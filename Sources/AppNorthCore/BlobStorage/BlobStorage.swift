
/// Where the offline queue keeps its entries: one blob, loaded at open and
/// replaced on every change. `save(nil)` erases it. Implement it with your
/// app's protected storage; the built-in ones are `MemoryStorage` and
/// `SQLiteBlobStorage`. Do not store credentials alongside it.
package protocol AppNorthOfflineQueueStorage: AnyObject, Sendable {
    func load() throws -> [UInt8]?
    func save(_ data: [UInt8]?) throws
}

/// Where the read cache keeps its entries. Same shape as the queue's, but
/// use separate instances: the formats differ, and one instance given to
/// both is refused.
package protocol AppNorthReadCacheStorage: AnyObject, Sendable {
    func load() throws -> [UInt8]?
    func save(_ data: [UInt8]?) throws
}

/// Storage whose blob can be changed atomically against other users of
/// the same stored blob: other handles in this process and other processes.
/// The built-in SQLite storage is one. A queue or cache on such a storage
/// re-reads the blob inside every change instead of trusting its loaded
/// copy, so two of them on one name never overwrite each other's entries.
package protocol AppNorthAtomicBlobStorage: AnyObject, Sendable {
    /// Runs `change` on the stored blob (nil when none) and stores what it
    /// returns (nil erases), as one step no other writer can interleave
    /// with. An error thrown by `change` leaves the stored blob untouched.
    func update<T>(_ change: ([UInt8]?) throws -> (value: [UInt8]?, result: T)) throws -> T
}

/// Storage in memory only.
package final class MemoryStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage {
    private let data = Lock<[UInt8]?>(nil, level: LockClass.blobData)
    package init() {}
    package func load() throws -> [UInt8]? { data.withLock { $0 } }
    package func save(_ newData: [UInt8]?) throws { data.withLock { $0 = newData } }
}

/// Storage as one row of the data directory's SQLite database. Several
/// instances, in one process or several, may use the same name: changes
/// go through `update`, one write transaction each.
package final class SQLiteBlobStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage, AppNorthAtomicBlobStorage {
    private let store: SQLiteStore
    private let name: String
    private let clock: any AppNorthClock

    package init(store: SQLiteStore, name: String, clock: any AppNorthClock = SystemClock()) throws(AppNorthError) {
        guard Limits.storageNameBytes.contains(name.utf8.count),
              name.utf8.allSatisfy({ b in
                  (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                      || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: ".")
                      || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
              }) else {
            throw .invalidArgument("storage name must be \(Limits.spelled(Limits.storageNameBytes)) characters of A-Z a-z 0-9 . _ -")
        }
        self.store = store
        self.name = name
        self.clock = clock
    }

    package func load() throws -> [UInt8]? {
        try store.kvGet(namespace: Schema.Namespace.blob, key: name)?.value
    }

    package func save(_ data: [UInt8]?) throws {
        if let data {
            try store.kvPut(namespace: Schema.Namespace.blob, key: name, value: data, updatedMs: clock.wallMilliseconds())
        } else {
            try store.kvDelete(namespace: Schema.Namespace.blob, key: name)
        }
    }

    package func update<T>(_ change: ([UInt8]?) throws -> (value: [UInt8]?, result: T)) throws -> T {
        try store.kvUpdate(namespace: Schema.Namespace.blob, key: name, updatedMs: clock.wallMilliseconds(), change)
    }
}

/// Which component uses a storage instance. A storage serves one queue or
/// one cache at a time: two users would each hold their own in-memory copy
/// and overwrite each other's blob.
enum StorageClaims {
    enum Role: String { case queue = "an offline queue", cache = "a read cache" }
    private final class Claims: Sendable { let roles = Lock<[ObjectIdentifier: Role]>([:], level: LockClass.storageClaims) }
    /// A fork() child has its own: its parent's queues and caches are not its own.
    private static let current = ForkLocal<Claims, Never> { Claims() }

    static func claim(_ storage: AnyObject, as role: Role) throws(AppNorthError) {
        let id = ObjectIdentifier(storage)
        let existing = current.value.roles.withLock { table -> Role? in
            if let current = table[id] { return current }
            table[id] = role
            return nil
        }
        if let existing {
            throw .wrongState("this storage is already used by \(existing.rawValue); give \(role.rawValue) its own storage")
        }
    }

    static func release(_ storage: AnyObject) {
        _ = current.value.roles.withLock { $0.removeValue(forKey: ObjectIdentifier(storage)) }
    }
}

/// Turns a storage implementation's error into the core's taxonomy (a
/// full queue, met inside a storage transaction, stays what it is).
func storageCall<T>(_ what: String, _ body: () throws -> T) throws(AppNorthError) -> T {
    do {
        return try body()
    } catch let error as AppNorthError {
        if case .storage = error { throw error }
        if case .wrongState = error { throw error }
        if case .queueFull = error { throw error }
        throw .storage("\(what) failed: \(error.message)")
    } catch {
        throw .storage("\(what) failed: \(error)")
    }
}

extension LockClass {
    /// `MemoryStorage.data`: an in-memory storage's bytes.
    static let blobData = LockClass.leaf("MemoryStorage.data")
    /// `StorageClaims.roles`: the storages claimed in this process.
    static let storageClaims = LockClass.leaf("StorageClaims.roles")
}
