
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
///
/// Several queues on one stored queue: on an `AppNorthAtomicBlobStorage`
/// (the built-in SQLite storage) every change is a read-modify-write of
/// the stored blob in one transaction, so queues in several handles or
/// processes share the entries safely; two flushing at once may both send
/// an entry, which its idempotency key makes harmless. Any other storage
/// has one owner: its blob is loaded once and overwritten on each change.
package final class AppNorthOfflineQueue: Sendable {
    package static let defaultLimit = 50
    /// The message of the `.queueFull` error (APPNORTH_E_QUEUE_FULL).
    static let fullMessage = "the offline queue is full; nothing was added"

    package let limit: Int
    package let storage: any AppNorthOfflineQueueStorage
    private let clock: any AppNorthClock
    /// The entries, in their stored blob.
    private let stored: StoredList<QueueCodec>
    /// One flush at a time, so two flushes never send the same entry.
    private let flushGate = OperationGate()

    /// `logger` gets a warning for stored entries found damaged and dropped.
    package init(storage: any AppNorthOfflineQueueStorage, limit: Int = AppNorthOfflineQueue.defaultLimit,
                clock: any AppNorthClock = SystemClock(), logger: Logger = .silent) throws(AppNorthError) {
        guard Limits.queueEntries.contains(limit) else {
            throw .invalidArgument("queue limit must be \(Limits.spelled(Limits.queueEntries))")
        }
        stored = try StoredList(storage: storage, load: { try storage.load() }, save: { try storage.save($0) }, logger: logger)
        self.storage = storage
        self.limit = limit
        self.clock = clock
    }

    // MARK: Submitting

    package func submitIdea(using client: AppNorthClient, boardID: String, title: String, body: String = "",
                           idempotencyKey: String? = nil) throws -> Bool {
        try submit(.idea(boardID: boardID, title: title, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    package func submitComment(using client: AppNorthClient, handle ideaID: String, body: String,
                              idempotencyKey: String? = nil) throws -> Bool {
        try submit(.comment(ideaID: ideaID, body: body), using: client, idempotencyKey: idempotencyKey)
    }

    package func submitFeedback(using client: AppNorthClient, _ feedback: AppNorthFeedback,
                               idempotencyKey: String? = nil) throws -> Bool {
        try submit(.feedback(feedback), using: client, idempotencyKey: idempotencyKey)
    }

    /// Tries the write now; queues it only on a network failure or a
    /// client cancel (the request may have reached the server: its
    /// idempotency key makes the replay harmless, and dropping it could
    /// lose the write).
    package func submit(_ write: CommunityWrite, using client: AppNorthClient, idempotencyKey key: String? = nil) throws -> Bool {
        try write.validate()
        let key = try idempotencyKey(key)
        let body = write.requestBody()
        do {
            _ = try client.post(write.path, body: body, key: key)
            return true
        } catch .network(let message), .cancelled(let message) {
            let now = clock.wallMilliseconds()
            let entry = QueueEntry(id: Random.uuidV7(unixMilliseconds: now), scope: client.scope,
                                   kind: write.kind, path: write.path, body: body, idempotencyKey: key,
                                   createdMs: now, attempts: 1, lastError: message)
            try append(entry)
            client.configuration.logger.log(.info, "\(write.kind) queued after a network failure")
            return false
        }
    }

    // MARK: Flushing

    /// Replays this client's scope's entries in order. A network failure
    /// stops the flush and keeps the rest; any other error is thrown and
    /// leaves the failing entry pending. A client cancel throws
    /// `.cancelled` and keeps the entry in flight and the rest (the entry
    /// is not named as failed). Returns how many were sent.
    @discardableResult
    package func flush(using client: AppNorthClient) throws -> Int {
        var sent = 0
        try flush(using: client, sentCount: &sent)
        return sent
    }

    /// The same, counting into `sent` as it goes, so a caller learns how
    /// many were sent before an error was thrown.
    package func flush(using client: AppNorthClient, sentCount sent: inout Int) throws {
        var failedEntryID: String?
        try flush(using: client, sentCount: &sent, failedEntryID: &failedEntryID)
    }

    /// The same, also naming the entry whose error stopped the flush, so a
    /// host can inspect it (`pendingEntries`) and discard it alone
    /// (`discard(entryID:)`) rather than its whole scope. `failedEntryID`
    /// is nil when the flush completed or a network failure stopped it.
    /// Each failed try is recorded in the entry's `attempts`/`lastError`.
    package func flush(using client: AppNorthClient, sentCount sent: inout Int, failedEntryID: inout String?) throws {
        sent = 0
        failedEntryID = nil
        var failed: String?
        var count = 0
        defer {
            sent = count
            failedEntryID = failed
        }
        try flushGate.run("flush") {
            let scope = client.scope
            let mine = try stored.current().filter { $0.scope == scope }
            for entry in mine {
                do throws(AppNorthError) {
                    _ = try client.post(entry.path, body: entry.body, key: entry.idempotencyKey)
                } catch {
                    try? recordFailure(of: entry.id, error.message)
                    if case .network = error { return }
                    if case .cancelled = error { throw error }
                    failed = entry.id
                    throw error
                }
                try stored.modify { list in list.removeAll { $0.id == entry.id } }
                count += 1
            }
        }
    }

    // MARK: Inspecting and discarding

    /// Entries pending over all stored scopes.
    /// Damaged stored entries found and dropped since this queue opened.
    package var damagedDropped: Int { stored.damagedDropped }

    package func pendingCount() throws -> Int {
        try stored.current().count
    }

    /// The pending entries, oldest first.
    package func pendingEntries() throws -> [QueueEntry] {
        try stored.current()
    }

    /// Discards the entries of one scope, or all when `scope` is nil (for
    /// logout). Returns how many.
    @discardableResult
    package func discard(scope: String?) throws -> Int {
        try stored.modify { list in
            let before = list.count
            list.removeAll { scope == nil || $0.scope == scope }
            return before - list.count
        }
    }

    /// Discards one entry by its id (from `pendingEntries` or a flush's
    /// `failedEntryID`). Returns false when no pending entry has that id:
    /// it was sent or discarded already, perhaps by another process.
    @discardableResult
    package func discard(entryID: String) throws -> Bool {
        try stored.modify { list in
            let before = list.count
            list.removeAll { $0.id == entryID }
            return list.count != before
        }
    }

    // MARK: Storage updates

    private func append(_ entry: QueueEntry) throws {
        try stored.modify { list in
            guard list.count < limit else { throw AppNorthError.queueFull(AppNorthOfflineQueue.fullMessage) }
            list.append(entry)
        }
    }

    private func recordFailure(of entryID: String, _ message: String) throws {
        try stored.modify { list in
            guard let index = list.firstIndex(where: { $0.id == entryID }) else { return }
            list[index].attempts = list[index].attempts < Int(Int32.max) ? list[index].attempts + 1 : list[index].attempts
            list[index].lastError = message
        }
    }
}
