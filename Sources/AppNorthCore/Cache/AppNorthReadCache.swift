
/// A TTL cache of board arrays and idea arrays, 300 s by default.
///
/// Expired entries read as `nil`: there is no stale fallback. Keys are an
/// account scope (server, app, account) plus, for ideas, every filter and
/// the search query. Pagination cursors, chat messages and private report
/// threads are never cached. Thread-safe.
///
/// On an `AppNorthAtomicBlobStorage` (the built-in SQLite storage) each
/// change is applied to the stored blob in one transaction, so caches in
/// several handles or processes never drop each other's entries; each
/// reads from its own loaded copy plus what it stored itself.
package final class AppNorthReadCache: Sendable {
    package static let defaultTTLSeconds = 300

    package let ttlSeconds: Int
    private let clock: any AppNorthClock
    /// The entries, in their stored blob.
    private let stored: StoredList<CacheCodec>

    /// `logger` gets a warning for stored entries found damaged and dropped.
    package init(storage: any AppNorthReadCacheStorage, ttlSeconds: Int = AppNorthReadCache.defaultTTLSeconds,
                clock: any AppNorthClock = SystemClock(), logger: Logger = .silent) throws(AppNorthError) {
        guard Limits.ttlSeconds.contains(ttlSeconds) else {
            throw .invalidArgument("cache TTL must be \(Limits.spelled(Limits.ttlSeconds)) seconds")
        }
        stored = try StoredList(storage: storage, load: { try storage.load() }, save: { try storage.save($0) }, logger: logger)
        self.ttlSeconds = ttlSeconds
        self.clock = clock
    }

    // MARK: Reading

    /// The fresh boards array for a scope, or nil.
    package func boards(scope: String) -> String? {
        fresh(kind: .boards, scope: scope, query: "")
    }

    /// The fresh ideas array for a scope and query, or nil. A query with a
    /// cursor is always nil: only first pages are cached.
    package func ideas(scope: String, query: IdeaQuery = IdeaQuery()) -> String? {
        guard query.cursor == nil else { return nil }
        return fresh(kind: .ideas, scope: scope, query: query.cacheKey)
    }

    // MARK: Storing

    /// Stores boards: an array, or a `{"boards":[...]}` response object.
    package func storeBoards(_ json: String, scope: String) throws {
        try store(kind: .boards, scope: scope, query: "", value: Self.array(from: json, member: "boards"))
    }

    /// Stores the first page of ideas for a query (queries with a cursor
    /// are refused: only first pages are cached).
    package func storeIdeas(_ json: String, scope: String, query: IdeaQuery = IdeaQuery()) throws {
        guard query.cursor == nil else {
            throw AppNorthError.invalidArgument("the cache stores first pages only: remove the cursor from the query")
        }
        try store(kind: .ideas, scope: scope, query: query.cacheKey, value: Self.array(from: json, member: "ideas"))
    }

    /// Removes a scope's boards and ideas.
    package func clear(scope: String) throws {
        try stored.modify { list in list.removeAll { $0.scope == scope } }
    }

    // MARK: -

    private func fresh(kind: CacheEntry.Kind, scope: String, query: String) -> String? {
        let now = (clock.monotonicNanoseconds(), clock.wallMilliseconds())
        return stored.loaded.first { $0.kind == kind && $0.scope == scope && $0.query == query && isFresh($0, now: now) }?.value
    }

    /// Monotonic age when the entry was stored by this process (wall-clock
    /// jumps cannot make it look fresh); wall age otherwise, where a time in
    /// the future counts as expired.
    private func isFresh(_ entry: CacheEntry, now: (mono: UInt64, wall: Int64)) -> Bool {
        let ttlMs = Int64(ttlSeconds) * 1000
        if let storedMono = entry.storedMono {
            return now.mono >= storedMono && Int64((now.mono - storedMono) / 1_000_000) < ttlMs
        }
        // Either time may be extreme (a damaged row, a host-set clock).
        let age = now.wall.subtractingSaturating(entry.storedWallMs)
        return age >= 0 && age < ttlMs
    }

    private func store(kind: CacheEntry.Kind, scope: String, query: String, value: String) throws {
        guard !scope.isEmpty else { throw AppNorthError.invalidArgument("scope is empty") }
        let entry = CacheEntry(kind: kind, scope: scope, query: query, value: value,
                               storedWallMs: clock.wallMilliseconds(), storedMono: clock.monotonicNanoseconds())
        let now = (clock.monotonicNanoseconds(), clock.wallMilliseconds())
        try stored.modify { list in
            // Replace the same key and drop what has expired.
            list = list.filter { !($0.kind == kind && $0.scope == scope && $0.query == query) && isFresh($0, now: now) } + [entry]
        }
    }

    /// Damaged stored entries found and dropped since this cache opened.
    package var damagedDropped: Int { stored.damagedDropped }

    /// The array to cache: the text itself if it is an array, else the
    /// named member of a response object.
    static func array(from json: String, member: String) throws(AppNorthError) -> String {
        let parsed = try JSON.parse(json, what: member)
        if parsed.kind == .array { return json }
        guard parsed.kind == .object, let array = parsed[member], array.kind == .array else {
            throw .invalidJSON("\(member) must be a JSON array or an object with a \"\(member)\" array", position: 0)
        }
        return array.serialized()
    }
}

struct CacheEntry: Sendable {
    enum Kind: String, Sendable { case boards, ideas }
    let kind: Kind
    let scope: String
    let query: String
    let value: String
    let storedWallMs: Int64
    /// Set for entries stored by this process; nil for loaded ones.
    let storedMono: UInt64?

    /// The same stored entry, whichever copy (loaded or this process's).
    func sameStore(as other: CacheEntry) -> Bool {
        kind == other.kind && scope == other.scope && query == other.query
            && storedWallMs == other.storedWallMs && value == other.value
    }
}

enum CacheCodec: StoredListCodec {
    static let what = "read cache"
    static let role = StorageClaims.Role.cache

    /// Entries this process stored keep their monotonic time.
    static func adopt(_ stored: [CacheEntry], loaded mine: [CacheEntry]) -> [CacheEntry] {
        stored.map { entry in mine.first { $0.sameStore(as: entry) } ?? entry }
    }

    static let format = "appnorth.read-cache"
    static let version: Int64 = 1

    static func encode(_ entries: [CacheEntry]) -> [UInt8] {
        let root = JSON.object()
        root.set("format", .string(format))
        root.set("version", .int(version))
        let list = JSON.array()
        for e in entries {
            let item = JSON.object()
            item.set("kind", .string(e.kind.rawValue))
            item.set("scope", .string(e.scope))
            item.set("query", .string(e.query))
            item.set("value", .string(e.value))
            item.set("stored_ms", .int(e.storedWallMs))
            list.append(item)
        }
        root.set("entries", list)
        return Array(root.serialized().utf8)
    }

    /// A cache may be rebuilt from the network, so unreadable entries (a
    /// missing field, a stored time outside `StoredWallTime.range`, a value
    /// that is not a JSON array) are skipped; a blob of another kind is
    /// still refused.
    static func decode(_ bytes: [UInt8], damage: inout StoredDamage) throws(AppNorthError) -> [CacheEntry] {
        guard let root = try? JSON.parse(bytes) else {
            damage.wholeBlob = "it is not valid JSON (\(bytes.count) bytes)"
            return []
        }
        guard root["format"]?.stringValue == format else {
            throw .storage("the storage does not hold a read cache (format \(root["format"]?.stringValue ?? "unknown"))")
        }
        guard (root["version"]?.intValue ?? .max) <= version else {
            damage.wholeBlob = "its format version is missing or newer than this library reads"
            return []
        }
        return (root["entries"]?.arrayElements ?? []).compactMap { item in
            guard let kind = item["kind"]?.stringValue.flatMap(CacheEntry.Kind.init(rawValue:)),
                  let scope = item["scope"]?.stringValue, let query = item["query"]?.stringValue,
                  let value = item["value"]?.stringValue, let stored = item["stored_ms"]?.intValue,
                  StoredWallTime.range.contains(stored),
                  // Handed to the host as a JSON array: anything else is damage.
                  (try? JSON.parse(value, what: "cached value"))?.kind == .array else {
                damage.drop(item["kind"]?.stringValue.flatMap(CacheEntry.Kind.init(rawValue:)).map { "a \($0.rawValue) entry" })
                return nil
            }
            return CacheEntry(kind: kind, scope: scope, query: query, value: value, storedWallMs: stored, storedMono: nil)
        }
    }
}
