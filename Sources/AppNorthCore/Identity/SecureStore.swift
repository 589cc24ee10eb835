import Glibc

/// Where identity values live: the anonymous id, the user id and the push
/// token. The Linux counterpart of the Keychain: by default a file only
/// the owner can read, or the host's own secure storage. Values never
/// appear in logs or error messages.
package protocol AppNorthSecureStore: AnyObject, Sendable {
    func read(_ key: String) throws -> String?
    /// `nil` deletes the value.
    func write(_ key: String, _ value: String?) throws
    /// The stored value if `accept` takes it, else `make()` stored and
    /// returned. The default reads then writes; a store shared by several
    /// processes makes it one step, so that they all keep the same value.
    func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String
}

extension AppNorthSecureStore {
    package func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String {
        if let value = try read(key), accept(value) { return value }
        let made = make()
        try write(key, made)
        return made
    }
}

/// Identity values in `identity.json` inside the data directory: mode
/// 0600 in a 0700 folder, replaced atomically (write, fsync, rename to a
/// name no other writer uses). Several processes share it: every change
/// holds a lock on `identity.json.lock` and re-reads the file first, so no
/// change overwrites another's and the first anonymous id made wins.
package final class FileSecureStore: AppNorthSecureStore {
    /// Reached through the folder's descriptor only (DataDirectory): a
    /// link planted as the file, its lock or a temporary is never followed,
    /// and a file another user owns is never adopted.
    private let directory: DataDirectory
    private let name: String
    private let lockName: String
    /// True when the file existed but held something other than a JSON
    /// object of strings when opened; the unreadable values were dropped.
    package let wasDamaged: Bool

    package init(directory: DataDirectory, file: String = "identity.json") throws(AppNorthError) {
        self.directory = directory
        name = file
        lockName = file + ".lock"
        close(try directory.openOrCreate(lockName))
        wasDamaged = try Self.read(directory, file).damaged
    }

    package func read(_ key: String) throws -> String? {
        try Self.read(directory, name).values[key]
    }

    package func write(_ key: String, _ value: String?) throws {
        try locked { () throws(AppNorthError) in
            var values = try Self.read(directory, name).values
            values[key] = value
            try Self.save(values, in: directory, as: name)
        }
    }

    package func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String {
        // Made before locking: nothing that takes another library lock
        // (the random pool) runs under the identity lock.
        let made = make()
        return try locked { () throws(AppNorthError) -> String in
            var values = try Self.read(directory, name).values
            if let value = values[key], accept(value) { return value }
            values[key] = made
            try Self.save(values, in: directory, as: name)
            return made
        }
    }

    private func locked<T>(_ body: () throws(AppNorthError) -> T) throws(AppNorthError) -> T {
        try directory.withFileLock(lockName, body)
    }

    private static func read(_ directory: DataDirectory, _ name: String) throws(AppNorthError) -> (values: [String: String], damaged: Bool) {
        guard let bytes = try directory.readWhole(name) else { return ([:], false) }
        // A damaged file loses identity values, not the SDK: start afresh.
        guard let root = try? JSON.parse(bytes), root.kind == .object else { return ([:], true) }
        var out: [String: String] = [:]
        var damaged = false
        for (key, value) in root.objectMembers {
            if let text = value.stringValue { out[key] = text } else { damaged = true }
        }
        return (out, damaged)
    }

    private static func save(_ values: [String: String], in directory: DataDirectory, as name: String) throws(AppNorthError) {
        let root = JSON.object()
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { root.set(key, .string(value)) }
        try directory.replaceWhole(name, with: Array(root.serialized().utf8), what: "identity file")
    }
}

/// The process-wide turn for changes of the data directory's small files
/// (`DataDirectory.withFileLock`: every FileSecureStore and super
/// properties file of the process, whatever its folder: changes are rare
/// and short). Like
/// every `Lock`, it is held across fork() by ForkGuard; a child has its own.
final class IdentityWriters: Sendable {
    static var shared: IdentityWriters { current.value }
    private static let current = ForkLocal<IdentityWriters, Never> { IdentityWriters() }
    let lock = Lock<Void>((), level: LockClass.identityWriters)
}

/// Secure storage in memory only (tests, and hosts that keep no identity).
package final class MemorySecureStore: AppNorthSecureStore {
    private let values = Lock<[String: String]>([:], level: LockClass.memorySecureStore)
    package init() {}
    package func read(_ key: String) throws -> String? { values.withLock { $0[key] } }
    package func write(_ key: String, _ value: String?) throws { values.withLock { $0[key] = value } }
}

extension LockClass {
    /// `IdentityWriters.lock`: the process's turn for identity file changes (the record
    /// lock on the file is taken inside it).
    static let identityWriters = LockClass(rank: 30, "IdentityWriters.lock")
    /// `MemorySecureStore.values`: an in-memory secure store.
    static let memorySecureStore = LockClass.leaf("MemorySecureStore.values")
}
