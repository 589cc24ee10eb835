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

    /// Runs `body` holding the identity lock: this process's writer lock,
    /// then a POSIX record lock on the lock file for other processes.
    /// Record locks, unlike flock, are not inherited by a forked child, so
    /// a child can never keep other processes waiting; they exclude
    /// processes, not threads, hence the process lock around them.
    private func locked<T>(_ body: () throws(AppNorthError) -> T) throws(AppNorthError) -> T {
        try IdentityWriters.shared.lock.withLock { _ throws(AppNorthError) -> T in
            let fd = try directory.openOrCreate(lockName)
            defer { close(fd) }  // closing releases the record lock
            var whole = Glibc.flock()
            whole.l_type = Int16(F_WRLCK)
            whole.l_whence = Int16(SEEK_SET)
            while fcntl(fd, F_SETLKW, &whole) != 0 {
                guard errno == EINTR else { throw .storage("cannot lock the identity file: \(String(cString: strerror(errno)))") }
            }
            return try body()
        }
    }

    private static func read(_ directory: DataDirectory, _ name: String) throws(AppNorthError) -> (values: [String: String], damaged: Bool) {
        guard let fd = try directory.openExisting(name) else { return ([:], false) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 4096) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
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
        let bytes = Array(root.serialized().utf8)
        // A new file under an unpredictable name (O_EXCL), renamed over the
        // old one: nothing planted under a temporary name is written to.
        let (fd, temporary) = try directory.createTemporary(name + ".tmp-")
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, directory.rename(temporary, to: name) else {
            let reason = String(cString: strerror(errno))
            directory.remove(temporary)
            throw .storage("cannot write the identity file: \(reason)")
        }
    }
}

/// The process-wide turn for identity file changes (every FileSecureStore
/// of the process, whatever its folder: changes are rare and short). Like
/// every `Lock`, it is held across fork() by ForkGuard; a child has its own.
final class IdentityWriters: Sendable {
    static var shared: IdentityWriters { current.value }
    private static let current = ForkLocal<IdentityWriters, Never> { IdentityWriters() }
    let lock = Lock<Void>((), level: LockLevel.identityWriters)
}

/// Secure storage in memory only (tests, and hosts that keep no identity).
package final class MemorySecureStore: AppNorthSecureStore {
    private let values = Lock<[String: String]>([:], level: LockLevel.memorySecureStore)
    package init() {}
    package func read(_ key: String) throws -> String? { values.withLock { $0[key] } }
    package func write(_ key: String, _ value: String?) throws { values.withLock { $0[key] = value } }
}
