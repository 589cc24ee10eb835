import Glibc
import Synchronization

/// One stored event: its place in the queue and its upload JSON.
struct StoredEvent: Sendable, Equatable {
    let seq: Int64
    /// The event id the server deduplicates on and names rejected events by.
    let id: String
    let payload: [UInt8]
}

/// The `events` table of the data directory's database: its rows, and its
/// totals kept in memory so that the limits cost nothing on `track`'s
/// path. Every change of the totals is a delta of rows a statement
/// reported deleted or inserted, so concurrent changes never undo each
/// other. Its lock is the database connection's (`SQLiteStore`).
final class EventTable: Sendable {
    let db: SQLiteStore
    let logger: Logger
    /// The table's rows and their bytes in the files (`RowCost`). Atomics, read on every `track`.
    let count = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    /// `PRAGMA data_version` when the table was last counted.
    let dataVersion = Atomic<Int>(-1)
    /// Damaged journal stretches and table rows dropped since open.
    let damagedDropped = Atomic<Int>(0)
    /// Moves whenever rows leave the table other than by an upload's own
    /// `remove(_:)` or damage (limits, a purge, rejected ids): a batch read
    /// ahead under an older value may hold rows that are gone.
    let removals = Atomic<UInt64>(0)

    /// Sequence numbers above this are damage, not history: at one event per
    /// nanosecond the queue would need 146 years to reach it.
    static let maxPlausibleSeq: Int64 = 1 << 62

    init(db: SQLiteStore, logger: Logger) throws(AppNorthError) {
        self.db = db
        self.logger = logger
        let dropped = try db.withConnection { conn throws(AppNorthError) in
            let dropped = try Self.dropImplausibleSequences(conn)
            try recount(conn)
            return dropped
        }
        if dropped > 0 { logger.log(.warning, "event queue: dropped \(dropped) damaged row(s) with an impossible sequence number") }
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

    /// Reads the totals anew from `events_totals`, which triggers keep in
    /// the same transaction as every insert and delete (Schema, migration
    /// 3): one row, never a count of the table. A row that is missing (a
    /// damaged file) is made again from the rows. Sizes come from the
    /// payloads themselves (`RowCost`, as SQL in the triggers), never from
    /// the stored `bytes` column, which a damaged row could set to
    /// anything. Called with the connection held.
    func recount(_ conn: SQLiteStore.Connection) throws(AppNorthError) {
        let totals = try Self.totals(conn)
        count.store(totals.count, ordering: .relaxed)
        bytes.store(totals.bytes, ordering: .relaxed)
    }

    /// The stored totals: rows, their bytes (`RowCost`), and the rows
    /// dropped past the limits since the directory was made.
    static func totals(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> (count: Int, bytes: Int, dropped: Int) {
        let select = "SELECT count, bytes, dropped FROM events_totals WHERE id = 1"
        if let row = try conn.query(select, [], { ($0.int(0), $0.int(1), $0.int(2)) }).first { return (max(0, row.0), max(0, row.1), max(0, row.2)) }
        let groups = try conn.query("SELECT length(payload), COUNT(*) FROM events GROUP BY 1") { ($0.int(0), $0.int(1)) }
        let count = groups.reduce(0) { $0 + $1.1 }, bytes = groups.reduce(0) { $0 + RowCost.bytes(payload: $1.0) * $1.1 }
        try conn.run("INSERT OR REPLACE INTO events_totals (id, count, bytes, dropped) VALUES (1, ?, ?, 0)",
                     [.int(Int64(count)), .int(Int64(bytes))])
        return (count, bytes, 0)
    }

    /// The totals as SQLite holds them: read again when another
    /// connection (another handle or process) has committed since the last
    /// look (`PRAGMA data_version`); this handle's own changes move the
    /// counters as they commit. Called with the connection held.
    func refreshTotals(_ conn: SQLiteStore.Connection) throws(AppNorthError) {
        let version = try conn.query("PRAGMA data_version") { $0.int(0) }.first ?? -1
        guard version != dataVersion.load(ordering: .relaxed) else { return }
        try recount(conn)
        dataVersion.store(version, ordering: .relaxed)
    }

    func add(_ rows: Int, _ size: Int) {
        count.add(rows, ordering: .relaxed)
        bytes.add(size, ordering: .relaxed)
    }

    /// Deletes the rows `condition` selects (with the connection held) and
    /// takes them off the totals; returns how many went.
    @discardableResult
    func delete(_ conn: SQLiteStore.Connection, where condition: String,
                _ arguments: [SQLiteStore.Value] = []) throws(AppNorthError) -> Int {
        let sizes = try conn.take(from: "events", where: condition, arguments, returning: "length(payload)") { RowCost.bytes(payload: $0.int(0)) }
        add(-sizes.count, -sizes.reduce(0, +))
        return sizes.count
    }

    /// The oldest `limit` events (after the row `after`, when given: the
    /// last of a batch still in flight). A row whose payload is not a sound
    /// event (a damaged file) is deleted and logged instead of being sent,
    /// so it cannot make the server refuse the good events in its batch.
    func oldest(_ limit: Int, after: Int64? = nil) throws(AppNorthError) -> [StoredEvent] {
        // Without `after`, every row counts (a damaged one may hold Int64.min).
        guard after != Int64.max else { return [] }
        let lowest = after.map { $0 + 1 } ?? Int64.min
        let (events, damaged) = try db.withConnection { conn throws(AppNorthError) in
            let rows = try conn.query("SELECT seq, id, payload FROM events WHERE seq >= ? ORDER BY seq LIMIT ?",
                                      [.int(lowest), .int(Int64(limit))]) {
                StoredEvent(seq: $0.int64(0), id: $0.text(1), payload: $0.blob(2))
            }
            let damaged = rows.filter { !EventSoundness.isSound($0.payload) }
            for row in damaged { try delete(conn, where: "seq = ?", [.int(row.seq)]) }
            return (damaged.isEmpty ? rows : rows.filter { EventSoundness.isSound($0.payload) }, damaged.count)
        }
        if damaged > 0 {
            damagedDropped.add(damaged, ordering: .relaxed)
            logger.log(.warning, "event queue: dropped \(damaged) damaged event row(s) that were not sound event objects")
        }
        return events
    }

    /// Removes a batch (rows already dropped for the limits are skipped).
    /// Returns how many rows went.
    @discardableResult
    func remove(_ batch: [StoredEvent]) throws(AppNorthError) -> Int {
        guard let first = batch.first?.seq, let last = batch.last?.seq else { return 0 }
        return try db.withConnection { conn throws(AppNorthError) in
            try delete(conn, where: "seq BETWEEN ? AND ?", [.int(first), .int(last)])
        }
    }

    /// Removes the events with these ids (a server rejected them), in one
    /// transaction. Returns how many rows went.
    @discardableResult
    func remove(ids: [String]) throws(AppNorthError) -> Int {
        guard !ids.isEmpty else { return 0 }
        // Counted once the transaction committed.
        let sizes = try db.transaction { conn throws(AppNorthError) -> [Int] in
            var sizes: [Int] = []
            for id in ids {
                sizes += try conn.take(from: "events", where: "id = ?", [.text(id)], returning: "length(payload)") { RowCost.bytes(payload: $0.int(0)) }
            }
            return sizes
        }
        removals.add(1, ordering: .releasing)
        add(-sizes.count, -sizes.reduce(0, +))
        return sizes.count
    }
}
