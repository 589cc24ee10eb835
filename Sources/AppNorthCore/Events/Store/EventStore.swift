import Glibc
import Synchronization

/// The durable event queue, wiring its stages: `track` appends to this
/// process's journal (`EventJournal`); the importer (`EventImporter`)
/// drains journals into the `events` table (`EventTable`) of the data
/// directory's SQLite database (WAL), which uploads read; the limits
/// (`QueueLimits`) count the directory and trim it, and lease the batch in
/// flight; orphan recovery (`OrphanRecovery`) imports what ended processes
/// left. Count and size (journal plus table) are kept in memory so the
/// limits cost nothing on the hot path.
final class EventStore: Sendable {
    let db: SQLiteStore
    let journal: EventJournal
    let table: EventTable
    let limits: QueueLimits
    let importer: EventImporter
    let recovery: OrphanRecovery
    let logger: Logger

    /// `epoch`: the stored consent revocation count the handle starts from;
    /// `largestJournal`: from the queue's limits.
    init(db: SQLiteStore, directory: DataDirectory, epoch: Int64, logger: Logger = .silent,
         largestJournal: Int = EventJournal.largestFile(maxEvents: 10_000, maxBytes: 5 << 20)) throws(AppNorthError) {
        self.db = db
        self.logger = logger
        table = try EventTable(db: db, logger: logger)
        journal = try EventJournal(directory: directory, epoch: epoch)
        limits = QueueLimits(table: table, journal: journal, largestJournal: largestJournal)
        importer = EventImporter(table: table, journal: journal, limits: limits, logger: logger)
        recovery = OrphanRecovery(importer: importer, largestJournal: largestJournal)
        try recovery.recover()
    }

    /// A last drain, so that a closed queue leaves its events in SQLite. If
    /// it fails, the journal stays and the next open imports it.
    deinit {
        _ = try? importer.drain(replacingFiles: false)
    }

    /// Queued events and bytes: table rows plus journal records, exactly
    /// (every stripe's unpublished records counted).
    var count: Int { queued.count }
    var bytes: Int { queued.bytes }
    var queued: (count: Int, bytes: Int) {
        let pending = journal.pending
        return (table.count.load(ordering: .relaxed) + pending.records, table.bytes.load(ordering: .relaxed) + pending.bytes)
    }
    /// `queued` read in the drain's turn, so never between an import's two
    /// counters (the table's, then the journal's), which the upload cycle's
    /// part imports move many times per flush: for what the host reads
    /// (stats, the queued count). `track` reads without the lock.
    var settledQueued: (count: Int, bytes: Int) { importer.state.withLock { _ in queued } }

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
        let count = table.count.load(ordering: .relaxed) + journal.totals.records.load(ordering: .relaxed) + ownRecords
        let bytes = table.bytes.load(ordering: .relaxed) + journal.totals.bytes.load(ordering: .relaxed) + ownBytes
        if count + margin.count >= near.count || bytes + margin.bytes >= near.bytes {
            journal.publish(stripe)
            return queued
        }
        if ownRecords >= step.count || ownBytes >= step.bytes { journal.publish(stripe) }
        return (count, bytes)
    }

    /// A revocation of consent: in one transaction stores the choice,
    /// counts the revocation and deletes every row; then moves the journal
    /// to the new epoch and purges its segments. Returns how many events
    /// went. The rows go with the count: an import checks the count in its
    /// own transaction, so no segment opened before can land afterwards.
    func revoke(nowMs: Int64) throws(AppNorthError) -> Int {
        defer {
            table.removals.add(1, ordering: .releasing)
            db.compact(stepPages: FileBudget.tightWALPages)  // the deleted events' pages leave the file
        }
        return try importer.purge { () throws(AppNorthError) -> (epoch: Int64, rows: Int) in
            try db.transaction { conn throws(AppNorthError) -> (epoch: Int64, rows: Int) in
                try ConsentRecord.putChoice(conn, .revoked, nowMs: nowMs)
                let epoch = try ConsentRecord.countRevocation(conn, nowMs: nowMs)
                return (epoch, try table.delete(conn, where: "1"))
            }
        }
    }

    /// Another handle revoked consent (the stored count is now `epoch`) and
    /// emptied the table: purges this handle's journal and counts the
    /// table's rows anew (this handle's totals only saw its own changes).
    /// Returns how many journaled events went.
    func purgeJournal(epoch: Int64) throws(AppNorthError) -> Int {
        defer { table.removals.add(1, ordering: .releasing) }
        return try importer.purge { () throws(AppNorthError) -> (epoch: Int64, rows: Int) in
            // With the connection held, as uploads change the totals.
            try db.withConnection { conn throws(AppNorthError) in try table.recount(conn) }
            return (epoch, 0)
        }
    }

    /// What the host reads (stats, the queued count): the directory's
    /// queue, in the drain's turn.
    var directoryQueued: Census {
        let census = try? importer.withTurn { _ throws(AppNorthError) -> Census in
            try db.withConnection { conn throws(AppNorthError) in try limits.takeCensus(conn) }
        }
        let queued = self.queued
        return census ?? Census(count: queued.count, bytes: queued.bytes, foreign: [], journals: 0)
    }

    /// Before an attempt: past a limit of the directory, trims now, so
    /// that no batch goes out while the directory holds more than its
    /// limits (another process may have filled it since the batch was
    /// read). Checked cheaply first (`QueueLimits.isOver`).
    func trimIfOverLimits(_ bounds: (count: Int, bytes: Int)) throws(AppNorthError) {
        if try importer.withTurn({ own throws(AppNorthError) in try limits.isOver(bounds, own: own) }) {
            try importer.drain(trimmingTo: bounds)
        }
    }

    /// The bytes the event store occupies: the database and its WAL, and
    /// every journal file in the directory.
    var bytesOnDisk: Int {
        var total = db.bytesOnDisk
        for name in journal.journalNames() { total += journal.directory.fileSize(name) }
        return total
    }
}

/// The stages' calls the queue's facade and tests make through the store.
extension EventStore {
    func oldest(_ limit: Int, after: Int64? = nil) throws(AppNorthError) -> [StoredEvent] {
        try table.oldest(limit, after: after)
    }
    @discardableResult
    func remove(_ batch: [StoredEvent]) throws(AppNorthError) -> Int { try table.remove(batch) }
    @discardableResult
    func remove(ids: [String]) throws(AppNorthError) -> Int { try table.remove(ids: ids) }
    @discardableResult
    func drain(trimmingTo bounds: (count: Int, bytes: Int)? = nil, replacingFiles: Bool = true) throws(AppNorthError) -> Int {
        try importer.drain(trimmingTo: bounds, replacingFiles: replacingFiles)
    }
    @discardableResult
    func drainPart(_ limit: Int, trimmingTo bounds: (count: Int, bytes: Int)? = nil) throws(AppNorthError) -> Int {
        try importer.drainPart(limit, trimmingTo: bounds)
    }
    var hasRetiredRest: Bool { importer.hasRetiredRest }
    var retiredSegments: [JournalSegment] { importer.retiredSegments }
    func recoverOrphans() throws(AppNorthError) { try recovery.recover() }
    func recoverOrphansIfDue() throws(AppNorthError) { try recovery.recoverIfDue() }
    func lease(_ batch: [StoredEvent], from floor: Int64?) throws(AppNorthError) -> [StoredEvent] {
        try limits.lease(batch, from: floor)
    }
    func endAttempt(delivered: Bool) { limits.endAttempt(delivered: delivered) }
    func releaseLease() { limits.releaseLease() }
}
