
/// Thrown when a write had to be queued but the queue is at its limit.
public enum AppNorthOfflineQueueError: Error, Sendable, Equatable {
    case full
}

/// Community writes that survive being offline.
///
/// `submitIdea`, `submitComment` and `submitFeedback` try the request at
/// once and return `true` when the server accepted it, or `false` when a
/// network failure made the queue store it. Only `AppNorthError.network`
/// queues; every other error is thrown and nothing is stored. Entries are
/// scoped to the client's API URL, App ID and lowercased email (or
/// `anonymous`), and `flush(using:)` replays only the flushing client's
/// scope, in order, with the original idempotency keys.
///
/// Thread-safe. Retain one queue per account session.
public final class AppNorthOfflineQueue: Sendable {
    public static let defaultLimit = 50

    public let limit: Int
    private let storage: any AppNorthOfflineQueueStorage
    private let clock: any AppNorthClock
    /// The loaded entries; always equal to what was last saved.
    private let entries: Lock<[QueueEntry]>
    /// One storage update at a time (the storage may be host code).
    private let gate = OperationGate()
    /// One flush at a time, so two flushes never send the same entry.
    private let flushGate = OperationGate()

    public init(storage: any AppNorthOfflineQueueStorage, limit: Int = AppNorthOfflineQueue.defaultLimit,
                clock: any AppNorthClock = SystemClock()) throws(AppNorthError) {
        guard (1...10_000).contains(limit) else { throw .invalidArgument("queue limit must be 1 to 10000") }
        try StorageClaims.claim(storage, as: .queue)
        do {
            let loaded = try storageCall("loading the offline queue") { try storage.load() }
            entries = Lock(try loaded.map(QueueCodec.decode) ?? [])
        } catch {
            StorageClaims.release(storage)
            throw error
        }
        self.storage = storage
        self.limit = limit
        self.clock = clock
    }

    deinit { StorageClaims.release(storage) }

    // MARK: Submitting

    public func submitIdea(using client: AppNorthClient, boardID: String, title: String, body: String = "",
                           idempotencyKey: String? = nil) throws -> Bool {
        try submit(.idea(boardID: boardID, title: title, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    public func submitComment(using client: AppNorthClient, handle ideaID: String, body: String,
                              idempotencyKey: String? = nil) throws -> Bool {
        try submit(.comment(ideaID: ideaID, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    public func submitFeedback(using client: AppNorthClient, _ feedback: AppNorthFeedback,
                               idempotencyKey: String? = nil) throws -> Bool {
        try submit(.feedback(feedback), using: client, idempotencyKey: idempotencyKey)
    }

    /// Tries the write now; queues it only on a network failure.
    public func submit(_ write: CommunityWrite, using client: AppNorthClient, idempotencyKey key: String? = nil) throws -> Bool {
        try write.validate()
        let key = try idempotencyKey(key)
        let body = write.requestBody()
        do {
            _ = try client.post(write.path, body: body, key: key)
            return true
        } catch .network {
            let entry = QueueEntry(id: Random.uuidV7(unixMilliseconds: clock.wallMilliseconds()), scope: client.scope,
                                   kind: write.kind, path: write.path, body: body, idempotencyKey: key,
                                   createdMs: clock.wallMilliseconds())
            try append(entry)
            client.configuration.logger.log(.info, "\(write.kind) queued after a network failure")
            return false
        }
    }

    // MARK: Flushing

    /// Replays this client's scope's entries in order. A network failure
    /// stops the flush and keeps the rest; any other error is thrown and
    /// leaves the failing entry pending. Returns how many were sent.
    @discardableResult
    public func flush(using client: AppNorthClient) throws -> Int {
        var sent = 0
        try flush(using: client, sentCount: &sent)
        return sent
    }

    /// The same, counting into `sent` as it goes, so a caller learns how
    /// many were sent before an error was thrown.
    public func flush(using client: AppNorthClient, sentCount sent: inout Int) throws {
        sent = 0
        try flushGate.run("flush") {
            let scope = client.scope
            let mine = entries.withLock { $0.filter { $0.scope == scope } }
            for entry in mine {
                do {
                    _ = try client.post(entry.path, body: entry.body, key: entry.idempotencyKey)
                } catch AppNorthError.network {
                    return
                }
                try remove { $0.id == entry.id }
                sent += 1
            }
        }
    }

    // MARK: Inspecting and discarding

    /// Entries pending over all stored scopes.
    public func pendingCount() throws -> Int {
        entries.withLock { $0.count }
    }

    /// The pending entries, oldest first.
    public func pendingEntries() -> [QueueEntry] {
        entries.withLock { $0 }
    }

    /// Discards the entries of one scope, or all when `scope` is nil (for
    /// logout). Returns how many.
    @discardableResult
    public func discard(scope: String?) throws -> Int {
        try remove { scope == nil || $0.scope == scope }
    }

    // MARK: Storage updates: change memory, save, and undo if saving fails

    private func append(_ entry: QueueEntry) throws {
        try gate.run("the offline queue") {
            let before = entries.withLock { $0 }
            guard before.count < limit else { throw AppNorthOfflineQueueError.full }
            try persist(before + [entry])
        }
    }

    @discardableResult
    private func remove(where match: (QueueEntry) -> Bool) throws -> Int {
        try gate.run("the offline queue") {
            let before = entries.withLock { $0 }
            let after = before.filter { !match($0) }
            if after.count != before.count { try persist(after) }
            return before.count - after.count
        }
    }

    /// Saves first, then updates memory, so memory never runs ahead of
    /// storage. Runs inside the gate, outside the data lock.
    private func persist(_ newEntries: [QueueEntry]) throws {
        let blob = newEntries.isEmpty ? nil : QueueCodec.encode(newEntries)
        try storageCall("saving the offline queue") { try storage.save(blob) }
        entries.withLock { $0 = newEntries }
    }
}
