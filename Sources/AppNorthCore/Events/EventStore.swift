import CJansson

/// One stored event: its place in the queue and its upload JSON.
struct StoredEvent: Sendable {
    let seq: Int64
    /// The event id the server deduplicates on and names rejected events by.
    let id: String
    let payload: [UInt8]
}

/// The durable event queue: rows in the data directory's SQLite database
/// (WAL). An insert has committed, and survives the process being killed,
/// before `insert` returns. Count and size are kept in memory so the limits
/// cost nothing on the hot path.
final class EventStore: Sendable {
    private let db: SQLiteStore
    private let totals: Lock<(count: Int, bytes: Int)>
    /// Rows waiting to be written (group commit, see `insert`).
    private let commits = GroupCommit()

    /// Leader-based group commit: rows wait in a list; one caller at a time
    /// (the leader) writes every waiting row, then wakes the others, whose
    /// rows it wrote. Followers sleep on the condition instead of queueing
    /// for the connection, so concurrent callers share one commit.
    final class GroupCommit: @unchecked Sendable {
        // @unchecked: every field is used with `condition`'s mutex held.
        let condition = MonotonicCondition()
        var rows: [(ticket: UInt64, id: String, payload: [UInt8])] = []
        var nextTicket: UInt64 = 1
        /// Every ticket up to this one has been written (or has failed).
        var doneThrough: UInt64 = 0
        var leaderActive = false
        var failures: [UInt64: AppNorthError] = [:]
    }

    /// Sequence numbers above this are damage, not history: at one event per
    /// nanosecond the queue would need 146 years to reach it.
    static let maxPlausibleSeq: Int64 = 1 << 62

    private let logger: Logger

    init(db: SQLiteStore, logger: Logger = .silent) throws(AppNorthError) {
        self.db = db
        self.logger = logger
        let (row, dropped) = try db.withConnection { conn throws(AppNorthError) in
            let dropped = try Self.dropImplausibleSequences(conn)
            // Sizes come from the payloads themselves, never from the stored
            // `bytes` column, which a damaged row could set to anything.
            let row = try conn.query("SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM events") {
                ($0.int(0), $0.int(1))
            }.first
            return (row, dropped)
        }
        if dropped > 0 { logger.log(.warning, "event queue: dropped \(dropped) damaged row(s) with an impossible sequence number") }
        totals = Lock(row ?? (0, 0))
    }

    /// A sequence number near the top of the range would stop every later
    /// insert (AUTOINCREMENT never reuses numbers): drop such rows and
    /// bring the counter back to the largest remaining one.
    private static func dropImplausibleSequences(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> Int {
        let dropped = try conn.run("DELETE FROM events WHERE seq > ?", [.int(maxPlausibleSeq)])
        try conn.run("UPDATE sqlite_sequence SET seq = (SELECT COALESCE(MAX(seq), 0) FROM events) "
                     + "WHERE name = 'events' AND seq > ?", [.int(maxPlausibleSeq)])
        return dropped
    }

    var count: Int { totals.withLock { $0.count } }
    var bytes: Int { totals.withLock { $0.bytes } }

    /// Writes one event and returns once it is committed.
    ///
    /// Group commit: the row joins a waiting list. If no other caller is
    /// writing, this one becomes the leader and writes every waiting row,
    /// in one transaction when there are several; otherwise it sleeps until
    /// a leader has written its row. A failed group fails each of its rows.
    func insert(id: String, payload: [UInt8]) throws(AppNorthError) {
        let c = commits
        let ticket = c.condition.locked { () -> UInt64 in
            let ticket = c.nextTicket
            c.nextTicket += 1
            c.rows.append((ticket, id, payload))
            return ticket
        }
        while true {
            let group = c.condition.locked { () -> [(ticket: UInt64, id: String, payload: [UInt8])]? in
                c.condition.wait(until: { c.doneThrough >= ticket || !c.leaderActive }, deadline: nil)
                guard c.doneThrough < ticket else { return nil }
                c.leaderActive = true
                defer { c.rows.removeAll(keepingCapacity: true) }
                return c.rows
            }
            guard let group else { break }
            let failure = write(group)
            c.condition.locked {
                if let failure { for row in group { c.failures[row.ticket] = failure } }
                c.doneThrough = group.last?.ticket ?? c.doneThrough
                c.leaderActive = false
                c.condition.broadcast()
            }
        }
        if let failure = c.condition.locked({ c.failures.removeValue(forKey: ticket) }) { throw failure }
    }

    /// Writes a group of rows; returns the error that failed them, if any.
    private func write(_ group: [(ticket: UInt64, id: String, payload: [UInt8])]) -> AppNorthError? {
        do {
            try db.withConnection { conn throws(AppNorthError) in
                do throws(AppNorthError) {
                    if group.count > 1 { try conn.exec("BEGIN IMMEDIATE") }
                    for row in group {
                        try conn.run("INSERT INTO events (id, payload, bytes) VALUES (?, ?, ?)",
                                     [.text(row.id), .blob(row.payload), .int(Int64(row.payload.count))])
                    }
                    if group.count > 1 { try conn.exec("COMMIT") }
                } catch {
                    if group.count > 1 { try? conn.exec("ROLLBACK") }
                    throw error
                }
            }
            totals.withLock {
                $0.count += group.count
                $0.bytes += group.reduce(0) { $0 + $1.payload.count }
            }
            return nil
        } catch {
            return error
        }
    }

    /// Drops the oldest events until both limits hold; returns how many.
    func dropOldest(maxCount: Int, maxBytes: Int) throws(AppNorthError) -> Int {
        // The common case, within both limits, costs no connection lock.
        guard totals.withLock({ $0.count > maxCount || $0.bytes > maxBytes }) else { return 0 }
        return try db.withConnection { conn throws(AppNorthError) in
            var dropped = 0
            while totals.withLock({ $0.count > maxCount || $0.bytes > maxBytes }) {
                let removed = try conn.query("DELETE FROM events WHERE seq = (SELECT MIN(seq) FROM events) RETURNING length(payload)") {
                    $0.int(0)
                }
                guard let size = removed.first else { break }
                totals.withLock { $0.count -= 1; $0.bytes -= size }
                dropped += 1
            }
            return dropped
        }
    }

    /// The oldest `limit` events. A row whose payload is not a sound event
    /// (a damaged file) is deleted and logged instead of being sent, so it
    /// cannot make the server refuse the good events in its batch.
    func oldest(_ limit: Int) throws(AppNorthError) -> [StoredEvent] {
        let (events, damaged) = try db.withConnection { conn throws(AppNorthError) in
            let rows = try conn.query("SELECT seq, id, payload FROM events ORDER BY seq LIMIT ?", [.int(Int64(limit))]) {
                StoredEvent(seq: $0.int64(0), id: $0.text(1), payload: $0.blob(2))
            }
            let damaged = rows.filter { !Self.isSound($0.payload) }
            for row in damaged {
                let gone = try conn.query("DELETE FROM events WHERE seq = ? RETURNING length(payload)", [.int(row.seq)]) {
                    $0.int(0)
                }
                totals.withLock { $0.count -= gone.count; $0.bytes -= gone.reduce(0, +) }
            }
            return (damaged.isEmpty ? rows : rows.filter { Self.isSound($0.payload) }, damaged.count)
        }
        if damaged > 0 { logger.log(.warning, "event queue: dropped \(damaged) damaged event row(s) that were not sound event objects") }
        return events
    }

    /// A payload as `EventPayload` writes it: a JSON object with a string
    /// id and name and a timestamp within `StoredWallTime.range`. Integers
    /// past 64 bits in the properties read as reals, as `track` accepts them.
    static func isSound(_ payload: [UInt8]) -> Bool {
        let parsed = payload.withUnsafeBytes { try? JSON.parse($0, what: "stored event", flags: size_t(JSON_DECODE_INT_AS_REAL)) }
        guard let root = parsed, root.kind == .object, root["id"]?.stringValue != nil,
              root["name"]?.stringValue != nil, let timestamp = root["timestamp"]?.doubleValue else { return false }
        return Double(StoredWallTime.range.lowerBound) <= timestamp && timestamp <= Double(StoredWallTime.range.upperBound)
    }

    /// Removes a batch (rows already dropped for the limits are skipped).
    /// Returns how many rows went.
    @discardableResult
    func remove(_ batch: [StoredEvent]) throws(AppNorthError) -> Int {
        guard let first = batch.first?.seq, let last = batch.last?.seq else { return 0 }
        return try db.withConnection { conn throws(AppNorthError) in
            let gone = try conn.query("DELETE FROM events WHERE seq BETWEEN ? AND ? RETURNING length(payload)",
                                      [.int(first), .int(last)]) { $0.int(0) }
            totals.withLock { $0.count -= gone.count; $0.bytes -= gone.reduce(0, +) }
            return gone.count
        }
    }

    /// Removes the events with these ids (a server rejected them), in one
    /// transaction. Returns how many rows went.
    @discardableResult
    func remove(ids: [String]) throws(AppNorthError) -> Int {
        guard !ids.isEmpty else { return 0 }
        return try db.withConnection { conn throws(AppNorthError) in
            var sizes: [Int] = []
            try conn.exec("BEGIN IMMEDIATE")
            do throws(AppNorthError) {
                for id in ids {
                    sizes += try conn.query("DELETE FROM events WHERE id = ? RETURNING length(payload)", [.text(id)]) { $0.int(0) }
                }
                try conn.exec("COMMIT")
            } catch {
                try? conn.exec("ROLLBACK")
                throw error
            }
            totals.withLock { $0.count -= sizes.count; $0.bytes -= sizes.reduce(0, +) }
            return sizes.count
        }
    }

    /// Removes every event; returns how many.
    func purge() throws(AppNorthError) -> Int {
        try db.withConnection { conn throws(AppNorthError) in
            let gone = try conn.run("DELETE FROM events")
            totals.withLock { $0 = (0, 0) }
            return gone
        }
    }
}
