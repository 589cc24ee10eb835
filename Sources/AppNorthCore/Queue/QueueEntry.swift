/// One queued write: what to send, with which key, for which account scope.
/// Never holds a credential token.
public struct QueueEntry: Sendable, Equatable {
    public let id: String
    /// "<api url>|<app id>|<lowercased email or anonymous>"
    public let scope: String
    public let kind: String
    /// API path under /v1/apps/{app}.
    public let path: String
    /// The JSON request body, exactly as first built.
    public let body: [UInt8]
    public let idempotencyKey: String
    public let createdMs: Int64
    /// How many times a send was tried and failed (the first try at submit
    /// included), and the last failure's message: a host uses them to find
    /// an entry that will never succeed (a comment on a deleted idea).
    public var attempts: Int = 0
    public var lastError: String? = nil
}

/// The queue's stored blob: a tagged, versioned JSON document.
enum QueueCodec: StoredListCodec {
    static let what = "offline queue"
    static let role = StorageClaims.Role.queue
    static func unchanged(_ before: [QueueEntry], _ after: [QueueEntry]) -> Bool { before == after }

    static let format = "appnorth.offline-queue"
    static let version: Int64 = 1

    static func encode(_ entries: [QueueEntry]) -> [UInt8] {
        let root = JSON.object()
        root.set("format", .string(format))
        root.set("version", .int(version))
        let list = JSON.array()
        for e in entries {
            let item = JSON.object()
            item.set("id", .string(e.id))
            item.set("scope", .string(e.scope))
            item.set("kind", .string(e.kind))
            item.set("path", .string(e.path))
            item.set("body", .string(String(decoding: e.body, as: UTF8.self)))
            item.set("idempotency_key", .string(e.idempotencyKey))
            item.set("created_ms", .int(e.createdMs))
            item.set("attempts", .int(Int64(e.attempts)))
            if let lastError = e.lastError { item.set("last_error", .string(lastError)) }
            list.append(item)
        }
        root.set("entries", list)
        return Array(root.serialized().utf8)
    }

    /// Refuses a blob it does not understand rather than dropping entries:
    /// a newer format or a cache's blob is an error, not an empty queue.
    /// Within a blob it reads, a damaged entry is dropped.
    static func decode(_ bytes: [UInt8]) throws(AppNorthError) -> [QueueEntry] {
        var damage = StoredDamage()
        return try decode(bytes, damage: &damage)
    }

    /// `decode`, noting the damaged entries it drops in `damage`.
    static func decode(_ bytes: [UInt8], damage: inout StoredDamage) throws(AppNorthError) -> [QueueEntry] {
        let root: JSON
        do {
            root = try JSON.parse(bytes, what: "stored offline queue")
        } catch {
            throw .storage(error.message)
        }
        guard root["format"]?.stringValue == format else {
            throw .storage("the storage does not hold an offline queue (format \(root["format"]?.stringValue ?? "unknown"))")
        }
        guard let version = root["version"]?.intValue, version <= Self.version else {
            throw .storage("the stored offline queue has a newer format version than this library reads")
        }
        var entries: [QueueEntry] = []
        for item in root["entries"]?.arrayElements ?? [] {
            if let entry = entry(item) {
                entries.append(entry)
            } else {
                damage.drop(item["id"]?.stringValue.map { "id " + String($0.prefix(64)) } ?? "no id")
            }
        }
        return entries
    }

    /// One entry, or nil when it is damaged: a missing field, a path that
    /// is not under the API, a body that is not a JSON object. Such an entry
    /// could never be sent, and would block the ones behind it. A damaged
    /// creation time (only shown, never used) is clamped instead.
    private static func entry(_ item: JSON) -> QueueEntry? {
        guard let id = item["id"]?.stringValue, !id.isEmpty, let scope = item["scope"]?.stringValue,
              let kind = item["kind"]?.stringValue, let path = item["path"]?.stringValue,
              path.hasPrefix("/"), !path.hasPrefix("//"),
              let body = item["body"]?.stringValue, (try? JSON.validateObject(body, what: "queued body")) != nil,
              let key = item["idempotency_key"]?.stringValue, !key.isEmpty,
              let created = item["created_ms"]?.intValue else { return nil }
        let range = StoredWallTime.range
        // Added later: optional, and clamped, since the blob may be old or
        // written by host storage.
        let attempts = Int(clamping: max(0, min(item["attempts"]?.intValue ?? 0, Int64(Int32.max))))
        return QueueEntry(id: id, scope: scope, kind: kind, path: path, body: Array(body.utf8), idempotencyKey: key,
                          createdMs: min(max(created, range.lowerBound), range.upperBound),
                          attempts: attempts, lastError: item["last_error"]?.stringValue)
    }
}
