import Glibc

/// Where identity values live: the anonymous id, the user id and the push
/// token. The Linux counterpart of the Keychain: by default a file only
/// the owner can read, or the host's own secure storage. Values never
/// appear in logs or error messages.
public protocol AppNorthSecureStore: AnyObject, Sendable {
    func read(_ key: String) throws -> String?
    /// `nil` deletes the value.
    func write(_ key: String, _ value: String?) throws
}

/// Identity values in `identity.json` inside the data directory: mode
/// 0600 in a 0700 folder, replaced atomically (write, fsync, rename).
public final class FileSecureStore: AppNorthSecureStore {
    private let path: String
    private let values: Lock<[String: String]>
    /// True when the file existed but held something other than a JSON
    /// object of strings; the unreadable values were dropped.
    public let wasDamaged: Bool

    public init(directory: DataDirectory, file: String = "identity.json") throws(AppNorthError) {
        path = directory.file(file)
        let loaded = try Self.read(path)
        values = Lock(loaded.values)
        wasDamaged = loaded.damaged
    }

    public func read(_ key: String) throws -> String? {
        values.withLock { $0[key] }
    }

    public func write(_ key: String, _ value: String?) throws {
        try values.withLock { current throws(AppNorthError) in
            var next = current
            next[key] = value
            try Self.save(next, to: path)
            current = next
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
        let temporary = path + ".tmp"
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

/// Secure storage in memory only (tests, and hosts that keep no identity).
public final class MemorySecureStore: AppNorthSecureStore {
    private let values = Lock<[String: String]>([:])
    public init() {}
    public func read(_ key: String) throws -> String? { values.withLock { $0[key] } }
    public func write(_ key: String, _ value: String?) throws { values.withLock { $0[key] = value } }
}
