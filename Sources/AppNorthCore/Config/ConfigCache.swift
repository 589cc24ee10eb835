import Glibc

/// The persisted tier: the last config fetched from the server, with its
/// ETag, version and fetch time, in one row of the data directory's SQLite
/// kv table (namespace "config", key = App ID).
///
/// A row that cannot be read back (not JSON, another format, a config that
/// is not an object) is deleted and the SDK carries on without it.
final class ConfigCache: Sendable {
    static let namespace = Schema.Namespace.config
    static let format = "appnorth.config-cache"
    static let formatVersion: Int64 = 1

    struct Record: Sendable {
        let document: ConfigDocument
        let etag: String?
        let version: Int64?
        let fetchedWallMilliseconds: Int64
    }

    private let store: SQLiteStore
    private let key: String
    private let logger: Logger
    /// The sequence number of the last saved record: a slower writer never
    /// overwrites a newer record.
    private let saved = Lock<UInt64>(0, level: LockClass.configCacheSaved)

    init(directory: DataDirectory, appID: String, logger: Logger) throws(AppNorthError) {
        store = try SQLiteStore(directory: directory)
        key = appID
        self.logger = logger
    }

    /// The stored record, or nil when none is stored or it is unreadable
    /// (then it is deleted).
    func load() -> Record? {
        let row: (value: [UInt8], updatedMs: Int64)?
        do {
            row = try store.kvGet(namespace: Self.namespace, key: key)
        } catch {
            logger.log(.warning, "config cache: cannot read the cached config: \(error.message)")
            return nil
        }
        guard let row else { return nil }
        do {
            return try Self.decode(row.value)
        } catch {
            logger.log(.warning, "config cache: discarding an unreadable cached config: \(error.message)")
            do {
                try store.kvDelete(namespace: Self.namespace, key: key)
            } catch {
                logger.log(.warning, "config cache: cannot delete the unreadable row: \(error.message)")
            }
            return nil
        }
    }

    /// Stores a record unless a newer one (higher sequence) is stored.
    func save(_ record: Record, sequence: UInt64) {
        let failure = saved.withLock { last -> AppNorthError? in
            guard sequence > last else { return nil }
            do throws(AppNorthError) {
                try store.kvPut(namespace: Self.namespace, key: key, value: Self.encode(record),
                                updatedMs: record.fetchedWallMilliseconds)
                last = sequence
                return nil
            } catch {
                return error
            }
        }
        // Logged after the lock: the sink is host code.
        if let failure { logger.log(.warning, "config cache: cannot save the config: \(failure.message)") }
    }

    // MARK: Row format

    /// `{"format","version","etag","config_version","fetched_ms","config"}`
    /// where "config" holds the document's exact text as a JSON string, so
    /// that numbers keep their spelling.
    static func encode(_ record: Record) -> [UInt8] {
        let root = JSON.object()
        root.set("format", .string(format))
        root.set("version", .int(formatVersion))
        root.set("etag", record.etag.map { JSON.string($0) } ?? .null())
        root.set("config_version", record.version.map { JSON.int($0) } ?? .null())
        root.set("fetched_ms", .int(record.fetchedWallMilliseconds))
        root.set("config", .string(record.document.text))
        return Array(root.serialized().utf8)
    }

    static func decode(_ bytes: [UInt8]) throws(AppNorthError) -> Record {
        let root = try JSON.parse(bytes, what: "cached config row")
        guard root.kind == .object, root["format"]?.stringValue == format else {
            throw .storage("the cached config row is not in the \(format) format")
        }
        guard let rowVersion = root["version"]?.intValue, rowVersion <= formatVersion else {
            throw .storage("the cached config row has an unknown format version")
        }
        guard let fetched = root["fetched_ms"]?.intValue, let text = root["config"]?.stringValue else {
            throw .storage("the cached config row lacks its fetch time or config")
        }
        guard StoredWallTime.range.contains(fetched) else {
            throw .storage("the cached config row has an impossible fetch time (\(fetched))")
        }
        // The ETag goes back out as If-None-Match: one that is not an
        // entity tag (RFC 9110) is dropped, never the cached config with it.
        let etag = EntityTag.validated(root["etag"]?.stringValue)
        let version = root["config_version"]?.intValue
        let document = try ConfigDocument(text: text, what: "cached config")
        return Record(document: document, etag: etag, version: version, fetchedWallMilliseconds: fetched)
    }
}

/// One open config per data directory and App ID in a process: two would
/// each run their own fetches and streams and overwrite each other's row.
enum ConfigCacheClaims {
    private final class Claims: Sendable { let keys = Lock<Set<String>>([], level: LockClass.configClaims) }
    /// A fork() child has its own: its parent's configs are not its own.
    private static let current = ForkLocal<Claims, Never> { Claims() }

    /// The claim key: the directory's identity (device, inode) and the App ID.
    static func key(directory: DataDirectory, appID: String) -> String {
        directory.identity + "|" + appID
    }

    static func claim(_ key: String) throws(AppNorthError) {
        let taken = current.value.keys.withLock { !$0.insert(key).inserted }
        if taken {
            throw .wrongState("a config for this App ID is already open on this data directory; free it first")
        }
    }

    static func release(_ key: String) {
        _ = current.value.keys.withLock { $0.remove(key) }
    }
}

extension LockClass {
    /// `ConfigCache.saved`: the last saved config record's stamp (the config database is written inside it).
    static let configCacheSaved = LockClass(rank: 40, "ConfigCache.saved")
    /// `ConfigCacheClaims.keys`: the config caches claimed in this process.
    static let configClaims = LockClass.leaf("ConfigCacheClaims.keys")
}
