import Glibc
import Synchronization

/// One stored event: its place in the queue and its upload JSON.
struct StoredEvent: Sendable, Equatable {
    let seq: Int64
    /// The event id the server deduplicates on and names rejected events by.
    let id: String
    let payload: [UInt8]
}

/// The durable event queue: `track` appends to this process's journal
/// (`EventJournal`), and the upload thread drains journals into rows of
/// the data directory's SQLite database (WAL), which uploads read. Count
/// and size (journal plus table) are kept in memory so the limits cost
/// nothing on the hot path.
final class EventStore: Sendable {
    let db: SQLiteStore
    let journal: EventJournal
    /// The table's rows and payload bytes. Atomics, read on every `track`;
    /// every change is a delta of rows a statement reported deleted or
    /// inserted, so concurrent changes never undo each other.
    let tableCount = Atomic<Int>(0)
    let tableBytes = Atomic<Int>(0)
    /// Held through a drain, so drains and purges never overlap.
    let draining: Lock<DrainState>

    struct DrainState {
        /// Segments rotated out of the journal and not imported yet, or
        /// not whole: an import failed, or the upload cycle's drain has
        /// imported a part (`drainPart`). Their files stay locked, and
        /// nothing writes to them any more.
        var retired: [JournalSegment] = []
        /// The readers of retired files, by name: a file imported in
        /// parts goes on from the window its last part ended in.
        var readers: [String: JournalReader] = [:]
        /// Import marks of files already deleted: removed by the next
        /// import's transaction rather than by one of their own.
        var settledMarks: [String] = []
        /// Where the last import of each file in part ended (its offset).
        var offsets: [String: Int] = [:]
        /// When dead processes' journals were last looked for.
        var lastScanMono: UInt64
    }
    /// Damaged journal stretches and table rows dropped since open.
    let damagedDropped = Atomic<Int>(0)
    /// Moves whenever rows leave the table other than by an upload's own
    /// `remove(_:)` or damage (limits, a purge, rejected ids): a batch read
    /// ahead under an older value may hold rows that are gone.
    let removals = Atomic<UInt64>(0)
    /// Rows dropped past the limits since open (`queue_limit`). Counted with
    /// the deletion, under the drain lock, so that a caller that waited for
    /// another thread's trim, or saw the queue it left, sees its count too.
    let limitDropped = DropCount()
    /// Journaled events purged at import because a revocation of consent
    /// came after their segment was opened (ConsentRecord).
    let consentDropped = Atomic<Int>(0)
    /// `PRAGMA data_version` when the table was last counted (QueueLimits).
    let dataVersion = Atomic<Int>(-1)
    /// This handle's key for the lease of its batch in flight (QueueLimits).
    let leaseKey = String(getpid()) + "-" + Random.hexToken(bytes: 8)
    /// The first row of a delivered batch not deleted yet (Int64.max:
    /// none): the lease reaches down to it.
    let leaseFloor = Atomic<Int64>(Int64.max)

    /// Sequence numbers above this are damage, not history: at one event per
    /// nanosecond the queue would need 146 years to reach it.
    static let maxPlausibleSeq: Int64 = 1 << 62

    let logger: Logger

    /// The largest journal file read (`EventJournal.largestFile`): an
    /// ended process's larger one is set aside, another's not counted.
    let largestJournal: Int

    /// `epoch`: the stored consent revocation count the handle starts from;
    /// `largestJournal`: from the queue's limits.
    init(db: SQLiteStore, directory: DataDirectory, epoch: Int64, logger: Logger = .silent,
         largestJournal: Int = EventJournal.largestFile(maxEvents: 10_000, maxBytes: 5 << 20)) throws(AppNorthError) {
        self.db = db
        self.logger = logger
        self.largestJournal = largestJournal
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
        tableCount.store(row?.0 ?? 0, ordering: .relaxed)
        tableBytes.store(row?.1 ?? 0, ordering: .relaxed)
        journal = try EventJournal(directory: directory, epoch: epoch)
        draining = Lock(DrainState(lastScanMono: Self.monotonicNanoseconds()), level: LockLevel.drain)
        try recoverOrphans()
    }

    /// A last drain, so that a closed queue leaves its events in SQLite. If
    /// it fails, the journal stays and the next open imports it.
    deinit {
        _ = try? drain(replacingFiles: false)
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

    /// Queued events and bytes: table rows plus journal records, exactly
    /// (every stripe's unpublished records counted).
    var count: Int { queued.count }
    var bytes: Int { queued.bytes }
    var queued: (count: Int, bytes: Int) {
        let pending = journal.pending
        return (tableCount.load(ordering: .relaxed) + pending.records, tableBytes.load(ordering: .relaxed) + pending.bytes)
    }
    /// `queued` read under the drain lock, so never between an import's
    /// two counters (the table's, then the journal's), which the upload
    /// cycle's part imports move many times per flush: for what the host
    /// reads (stats, the queued count). `track` reads without the lock.
    var settledQueued: (count: Int, bytes: Int) { draining.withLock { _ in queued } }

    func addToTable(_ count: Int, _ bytes: Int) {
        tableCount.add(count, ordering: .relaxed)
        tableBytes.add(bytes, ordering: .relaxed)
    }

    /// Events in the journal, not yet drained into the table.
    var journaled: Int { journal.pending.records }

    /// How `track` sees the queue right after its append, with its stripe
    /// locked, for its limit and wake checks. Far from the thresholds
    /// (`near`), the figure is the table, the journal's shared totals and
    /// this stripe's own unpublished records, and the stripe publishes
    /// only every `step` records or bytes, so that threads tracking at once
    /// do not all write one counter. Within `margin` of a threshold it
    /// publishes at once and counts every stripe: the figure is then
    /// exact, and a threshold is seen the moment it is crossed.
    func queuedAfterAppend(_ stripe: JournalStripe, near: (count: Int, bytes: Int),
                           step: (count: Int, bytes: Int), margin: (count: Int, bytes: Int)) -> (count: Int, bytes: Int) {
        let ownRecords = stripe.unpublishedRecords.load(ordering: .relaxed)
        let ownBytes = stripe.unpublishedBytes.load(ordering: .relaxed)
        let count = tableCount.load(ordering: .relaxed) + journal.totals.records.load(ordering: .relaxed) + ownRecords
        let bytes = tableBytes.load(ordering: .relaxed) + journal.totals.bytes.load(ordering: .relaxed) + ownBytes
        if count + margin.count >= near.count || bytes + margin.bytes >= near.bytes {
            journal.publish(stripe)
            return queued
        }
        if ownRecords >= step.count || ownBytes >= step.bytes { journal.publish(stripe) }
        return (count, bytes)
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
            let damaged = rows.filter { !Self.isSound($0.payload) }
            for row in damaged {
                let gone = try conn.take(from: "events", where: "seq = ?", [.int(row.seq)], returning: "length(payload)") {
                    $0.int(0)
                }
                addToTable(-gone.count, -gone.reduce(0, +))
            }
            return (damaged.isEmpty ? rows : rows.filter { Self.isSound($0.payload) }, damaged.count)
        }
        if damaged > 0 { damagedDropped.add(damaged, ordering: .relaxed) }
        if damaged > 0 { logger.log(.warning, "event queue: dropped \(damaged) damaged event row(s) that were not sound event objects") }
        return events
    }

    /// A payload as `EventPayload` writes it (`EventSoundness`).
    static func isSound(_ payload: [UInt8]) -> Bool { EventSoundness.isSound(payload) }

    /// Removes a batch (rows already dropped for the limits are skipped).
    /// Returns how many rows went.
    @discardableResult
    func remove(_ batch: [StoredEvent]) throws(AppNorthError) -> Int {
        guard let first = batch.first?.seq, let last = batch.last?.seq else { return 0 }
        return try db.withConnection { conn throws(AppNorthError) in
            let gone = try conn.take(from: "events", where: "seq BETWEEN ? AND ?", [.int(first), .int(last)],
                                     returning: "length(payload)") { $0.int(0) }
            addToTable(-gone.count, -gone.reduce(0, +))
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
                    sizes += try conn.take(from: "events", where: "id = ?", [.text(id)], returning: "length(payload)") { $0.int(0) }
                }
                try conn.exec("COMMIT")
            } catch {
                try? conn.exec("ROLLBACK")
                throw error
            }
            removals.add(1, ordering: .releasing)
            addToTable(-sizes.count, -sizes.reduce(0, +))
            return sizes.count
        }
    }

    /// A revocation of consent: in one transaction stores the choice,
    /// counts the revocation and deletes every row; then moves the journal
    /// to the new epoch and purges its segments. Returns how many events
    /// went. The rows go with the count: an import checks the count in its
    /// own transaction, so no segment opened before can land afterwards.
    func revoke(nowMs: Int64) throws(AppNorthError) -> Int {
        defer { removals.add(1, ordering: .releasing) }
        return try draining.withLock { state throws(AppNorthError) -> Int in
            let (epoch, sizes) = try db.transaction { conn throws(AppNorthError) -> (Int64, [Int]) in
                try ConsentRecord.putChoice(conn, .revoked, nowMs: nowMs)
                let epoch = try ConsentRecord.countRevocation(conn, nowMs: nowMs)
                let sizes = try conn.take(from: "events", where: "1", returning: "length(payload)") { $0.int(0) }
                addToTable(-sizes.count, -sizes.reduce(0, +))
                return (epoch, sizes)
            }
            return try sizes.count + purgeJournal(epoch: epoch, &state)
        }
    }

    /// Another handle revoked consent (the stored count is now `epoch`) and
    /// emptied the table: purges this handle's journal and counts the
    /// table's rows anew (this handle's totals only saw its own changes).
    /// Returns how many journaled events went.
    func purgeJournal(epoch: Int64) throws(AppNorthError) -> Int {
        defer { removals.add(1, ordering: .releasing) }
        return try draining.withLock { state throws(AppNorthError) -> Int in
            let gone = try purgeJournal(epoch: epoch, &state)
            // With the connection held, as uploads change the totals.
            try db.withConnection { conn throws(AppNorthError) in
                let row = try conn.query("SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM events") {
                    ($0.int(0), $0.int(1))
                }.first
                tableCount.store(row?.0 ?? 0, ordering: .relaxed)
                tableBytes.store(row?.1 ?? 0, ordering: .relaxed)
            }
            return gone
        }
    }

    /// Moves the journal to `epoch`, then rotates every stripe and removes
    /// every segment taken. A `track` still writing holds its stripe's
    /// lock, which the rotation waits for: its event is purged too.
    /// Returns how many records went.
    private func purgeJournal(epoch: Int64, _ state: inout DrainState) throws(AppNorthError) -> Int {
        journal.epoch.store(epoch, ordering: .releasing)
        try journal.rotate(into: &state.retired, fresh: false)
        var gone = 0
        for segment in state.retired {
            // A file imported in part loses its rest.
            gone += journal.unsettledRecords(segment)
            if segment.settledRecords.load(ordering: .relaxed) > 0 { state.settledMarks.append(segment.name) }
            journal.directory.remove(segment.name)
            journal.settle(segment)
        }
        state.retired.removeAll()
        state.readers.removeAll()
        state.offsets.removeAll()
        return gone
    }
}
