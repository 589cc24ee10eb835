import Glibc

/// Where identity values live: the anonymous id, the user id and the push
/// token. The Linux counterpart of the Keychain: by default a file only
/// the owner can read, or the host's own secure storage. Values never
/// appear in logs or error messages.
public protocol AppNorthSecureStore: AnyObject, Sendable {
    func read(_ key: String) throws -> String?
    /// `nil` deletes the value.
    func write(_ key: String, _ value: String?) throws
    /// The stored value if `accept` takes it, else `make()` stored and
    /// returned. The default reads then writes; a store shared by several
    /// processes makes it one step, so that they all keep the same value.
    func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String
}

extension AppNorthSecureStore {
    public func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String {
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
public final class FileSecureStore: AppNorthSecureStore {
    private let path: String
    private let lockPath: String
    /// True when the file existed but held something other than a JSON
    /// object of strings when opened; the unreadable values were dropped.
    public let wasDamaged: Bool

    public init(directory: DataDirectory, file: String = "identity.json") throws(AppNorthError) {
        path = directory.file(file)
        lockPath = try directory.ensurePrivateFile(file + ".lock")
        wasDamaged = try Self.read(path).damaged
    }

    public func read(_ key: String) throws -> String? {
        try Self.read(path).values[key]
    }

    public func write(_ key: String, _ value: String?) throws {
        try locked { () throws(AppNorthError) in
            var values = try Self.read(path).values
            values[key] = value
            try Self.save(values, to: path)
        }
    }

    public func readOrCreate(_ key: String, accept: (String) -> Bool, _ make: () -> String) throws -> String {
        // Made before locking: nothing that takes another library lock
        // (the random pool) runs under the identity lock.
        let made = make()
        return try locked { () throws(AppNorthError) -> String in
            var values = try Self.read(path).values
            if let value = values[key], accept(value) { return value }
            values[key] = made
            try Self.save(values, to: path)
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
            let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw .storage("cannot open the identity lock file: \(String(cString: strerror(errno)))") }
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

    private static func read(_ path: String) throws(AppNorthError) -> (values: [String: String], damaged: Bool) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return ([:], false) }
            throw .storage("cannot read the identity file: \(String(cString: strerror(errno)))")
        }
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

    private static func save(_ values: [String: String], to path: String) throws(AppNorthError) {
        let root = JSON.object()
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { root.set(key, .string(value)) }
        let bytes = Array(root.serialized().utf8)
        // A name of this writer's own: a shared ".tmp" could be renamed
        // away under another writer between its write and its rename.
        // Writers of one process take turns, so the pid is enough.
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage("cannot write the identity file: \(String(cString: strerror(errno)))") }
        fchmod(fd, 0o600)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw .storage("cannot write the identity file: \(String(cString: strerror(errno)))")
        }
    }
}

/// The process-wide turn for identity file changes (every FileSecureStore
/// of the process, whatever its folder: changes are rare and short). Like
/// every `Lock`, it is held across fork() by ForkGuard, so a child never
/// starts with it held by a thread it does not have.
final class IdentityWriters: Sendable {
    static let shared = IdentityWriters()
    let lock = Lock<Void>(())
}

/// Secure storage in memory only (tests, and hosts that keep no identity).
public final class MemorySecureStore: AppNorthSecureStore {
    private let values = Lock<[String: String]>([:])
    public init() {}
    public func read(_ key: String) throws -> String? { values.withLock { $0[key] } }
    public func write(_ key: String, _ value: String?) throws { values.withLock { $0[key] = value } }
}
