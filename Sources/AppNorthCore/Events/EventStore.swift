import Glibc
import Synchronization

/// One stored event: its place in the queue and its upload JSON.
struct StoredEvent: Sendable {
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
    private let db: SQLiteStore
    let journal: EventJournal
    /// The table's rows and payload bytes. Atomics, read on every `track`;
    /// every change is a delta of rows a statement reported deleted or
    /// inserted, so concurrent changes never undo each other.
    private let tableCount = Atomic<Int>(0)
    private let tableBytes = Atomic<Int>(0)
    /// Held through a drain, so drains and purges never overlap.
    private let draining: Lock<DrainState>

    struct DrainState {
        /// Segments rotated out of the journal and not imported yet, or
        /// not whole: an import failed, or the upload cycle's drain has
        /// imported a part (`drainPart`). Their files stay locked, and
        /// nothing writes to them any more.
        var retired: [JournalSegment] = []
        /// The bytes of retired files read so far, by name: a file
        /// imported in parts is read once.
        var contents: [String: [UInt8]] = [:]
        /// Import marks of files already deleted: removed by the next
        /// import's transaction rather than by one of their own.
        var settledMarks: [String] = []
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
    let limitDropped = Atomic<Int>(0)
    /// Journaled events purged at import because a revocation of consent
    /// came after their segment was opened (ConsentRecord).
    let consentDropped = Atomic<Int>(0)

    /// Sequence numbers above this are damage, not history: at one event per
    /// nanosecond the queue would need 146 years to reach it.
    static let maxPlausibleSeq: Int64 = 1 << 62

    private let logger: Logger

    /// `epoch`: the stored consent revocation count the handle starts from.
    init(db: SQLiteStore, directory: DataDirectory, epoch: Int64, logger: Logger = .silent) throws(AppNorthError) {
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
        tableCount.store(row?.0 ?? 0, ordering: .relaxed)
        tableBytes.store(row?.1 ?? 0, ordering: .relaxed)
        journal = try EventJournal(directory: directory, epoch: epoch)
        draining = Lock(DrainState(lastScanMono: Self.monotonicNanoseconds()))
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

    private func addToTable(_ count: Int, _ bytes: Int) {
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

    // MARK: Journal to table

    /// Moves the journal's records into the table: rotates every used
    /// stripe's file out and imports them, with the rest of any file
    /// imported in part before, in one transaction. Then, with `limits`,
    /// drops the oldest rows past them. Returns how many rows were
    /// dropped. `replacingFiles: false` (at close) leaves the stripes
    /// without a file instead of making fresh ones nobody will write.
    ///
    /// All under one lock with purges, so that the totals a trim reads are
    /// never caught between an import's two counters (the table's and the
    /// journal's), and two trims never drop the same excess twice.
    @discardableResult
    func drain(trimmingTo limits: (count: Int, bytes: Int)? = nil, replacingFiles: Bool = true) throws(AppNorthError) -> Int {
        try drain(at: nil, trimmingTo: limits, replacingFiles: replacingFiles)
    }

    /// The upload cycle's drain: imports at most `limit` of the oldest
    /// journaled events (one transaction), so that the first batch goes out
    /// without waiting for the whole journal; the cycle imports the rest a
    /// part at a time while its requests are in flight. While rotated-out
    /// files still hold events, no stripe is rotated: the newer files wait
    /// until the older ones are imported, and events go out oldest first.
    /// Then trims like `drain`.
    @discardableResult
    func drainPart(_ limit: Int, trimmingTo limits: (count: Int, bytes: Int)? = nil) throws(AppNorthError) -> Int {
        try drain(at: max(1, limit), trimmingTo: limits, replacingFiles: true)
    }

    /// Whether rotated-out files still hold events to import.
    var hasRetiredRest: Bool { draining.withLock { !$0.retired.isEmpty } }

    /// The rotated-out segments not imported whole (for tests).
    var retiredSegments: [JournalSegment] { draining.withLock { $0.retired } }

    private func drain(at most: Int?, trimmingTo limits: (count: Int, bytes: Int)?,
                       replacingFiles: Bool) throws(AppNorthError) -> Int {
        try draining.withLock { state throws(AppNorthError) -> Int in
            // Past a limit, the oldest events to drop may be journaled:
            // everything goes in, so that the trim drops exactly those.
            var most = most
            if let limits, most != nil {
                let queued = self.queued
                if queued.count > limits.count || queued.bytes > limits.bytes { most = nil }
            }
            // A stripe whose fresh file cannot be made keeps its old one
            // for the next drain; the others are imported now.
            var rotateError: AppNorthError?
            if most == nil || state.retired.isEmpty {
                do throws(AppNorthError) {
                    try journal.rotate(into: &state.retired, fresh: replacingFiles)
                } catch {
                    rotateError = error
                }
            }
            if !state.retired.isEmpty { try importRetired(&state, limit: most ?? .max) }
            if let rotateError { throw rotateError }
            guard let limits else { return 0 }
            return try dropOldest(maxCount: limits.count, maxBytes: limits.bytes)
        }
    }

    /// Imports up to `limit` events of the retired segments and settles
    /// what went in; a segment imported whole is deleted and leaves
    /// `retired`.
    private func importRetired(_ state: inout DrainState, limit: Int) throws(AppNorthError) {
        var files: [JournalFile] = []
        for segment in state.retired {
            let contents: [UInt8]
            if let read = state.contents[segment.name] {
                contents = read
            } else {
                contents = try segment.contents()
                state.contents[segment.name] = contents
            }
            files.append(JournalFile(name: segment.name, path: segment.path, contents: contents))
        }
        let parts = try importJournals(files, limit: limit, &state.settledMarks)
        var rest: [JournalSegment] = []
        for (segment, part) in zip(state.retired, parts) {
            if part.finished {
                journal.settle(segment)
                state.contents[segment.name] = nil
            } else {
                journal.settle(segment, records: part.records, bytes: part.bytes)
                rest.append(segment)
            }
        }
        state.retired = rest
    }

    /// A journal file read whole, to import.
    struct JournalFile {
        let name: String
        let path: String
        let contents: [UInt8]
    }

    /// What one import took from one file.
    struct ImportedPart {
        /// Records taken (queued, or purged for consent), and their payload bytes.
        var records = 0
        var bytes = 0
        /// Nothing is left: the file is marked imported and deleted.
        var finished = false
    }

    /// A file's place in an import: the next record not imported (`head`,
    /// decoded ahead) and where it starts.
    private struct ImportCursor {
        var position: Int
        var head: JournalRecord.Event?
        var headMilliseconds: Int64 = 0
        var headEnd = 0
        var damaged = 0

        /// Decodes the next record from `from` on.
        mutating func advance(_ contents: [UInt8], from: Int) {
            guard let found = JournalRecord.next(in: contents, from: from) else {
                position = max(from, contents.count)
                head = nil
                return
            }
            damaged += found.damaged
            position = found.start
            head = found.event
            headMilliseconds = found.event?.milliseconds ?? 0
            headEnd = found.end
        }
    }

    /// Imports up to `limit` events of journal files, oldest first (the
    /// files' next records merged by their timestamps: several stripes'
    /// files hold events of the same moments; within one file, the order
    /// written), and deletes the files imported to their end. The import
    /// commits with a mark per file: a file imported whole is marked so
    /// (a crash before it is deleted leaves a marked file, which is only
    /// deleted), a file imported in part gets a progress mark with the
    /// offset of its first record not imported, where any later import
    /// (this process's next part, or another's recovery after a crash)
    /// starts. No record is imported twice or skipped. The transaction
    /// also drops the marks of files deleted earlier (`settledMarks`), and
    /// these files' marks join them. A file opened before the latest
    /// revocation of consent (its epoch is older than the stored count) is
    /// purged instead: marked and deleted, nothing imported.
    private func importJournals(_ files: [JournalFile], limit: Int = .max,
                                _ settledMarks: inout [String]) throws(AppNorthError) -> [ImportedPart] {
        let (count, bytes, refused, cursors, parts) = try db.transaction {
            conn throws(AppNorthError) -> (Int, Int, Int, [ImportCursor], [ImportedPart]) in
            let revocations = try ConsentRecord.revocations(conn)
            var parts = [ImportedPart](repeating: ImportedPart(), count: files.count)
            var cursors: [ImportCursor] = []
            var refused = 0
            for (index, file) in files.enumerated() {
                var cursor = ImportCursor(position: file.contents.count)
                defer { cursors.append(cursor) }
                guard let start = try Self.importedOffset(conn, file.name, within: file.contents.count) else { continue }
                cursor.advance(file.contents, from: start)
                guard EventJournal.epoch(ofName: file.name) == revocations else {
                    while let event = cursor.head {
                        parts[index].records += 1
                        parts[index].bytes += event.payload.count
                        cursor.advance(file.contents, from: cursor.headEnd)
                    }
                    refused += parts[index].records
                    continue
                }
            }
            var count = 0, bytes = 0, taken = 0
            let insert = try conn.rowInserter("INSERT OR IGNORE INTO events (id, payload, bytes) VALUES (?, ?, ?)")
            while taken < limit {
                var oldest: Int?
                for index in cursors.indices where cursors[index].head != nil {
                    if let best = oldest, cursors[best].headMilliseconds <= cursors[index].headMilliseconds { continue }
                    oldest = index
                }
                guard let index = oldest, let event = cursors[index].head else { break }
                // An id already queued is the same event (ids are UUIDv7).
                let added = try insert.run(event.id, event.payload, Int64(event.payload.count))
                if added > 0 {
                    count += 1
                    bytes += event.payload.count
                }
                parts[index].records += 1
                parts[index].bytes += event.payload.count
                taken += 1
                cursors[index].advance(files[index].contents, from: cursors[index].headEnd)
            }
            for (index, file) in files.enumerated() {
                if cursors[index].head == nil {
                    parts[index].finished = true
                    try conn.run("INSERT OR REPLACE INTO kv (namespace, key, value, updated_ms) VALUES (?, ?, x'', 0)",
                                 [.text(Self.importedNamespace), .text(file.name)])
                    try conn.run("DELETE FROM kv WHERE namespace = ? AND key = ?", [.text(Self.progressNamespace), .text(file.name)])
                } else if parts[index].records > 0 {
                    try conn.run("INSERT OR REPLACE INTO kv (namespace, key, value, updated_ms) VALUES (?, ?, ?, 0)",
                                 [.text(Self.progressNamespace), .text(file.name), .blob(Array(String(cursors[index].position).utf8))])
                }
            }
            for settled in settledMarks {
                try conn.run("DELETE FROM kv WHERE namespace IN (?, ?) AND key = ?",
                             [.text(Self.importedNamespace), .text(Self.progressNamespace), .text(settled)])
            }
            return (count, bytes, refused, cursors, parts)
        }
        for (file, cursor) in zip(files, cursors) where cursor.damaged > 0 {
            damagedDropped.add(cursor.damaged, ordering: .relaxed)
            logger.log(.warning, "event queue: skipped \(cursor.damaged) damaged stretch(es) of the event journal \(file.name)")
        }
        if refused > 0 {
            consentDropped.add(refused, ordering: .relaxed)
            logger.log(.info, "event queue: purged \(refused) event(s) journaled before a revocation of consent")
        }
        settledMarks.removeAll()
        addToTable(count, bytes)
        for (file, part) in zip(files, parts) where part.finished {
            unlink(file.path)
            settledMarks.append(file.name)
        }
        return parts
    }

    /// Where an import of `name` starts: the offset its progress mark
    /// holds (clamped to the file; a mark that is not a number starts over,
    /// and ids already queued are ignored), 0 without a mark, nil when the
    /// file is marked imported whole.
    private static func importedOffset(_ conn: SQLiteStore.Connection, _ name: String,
                                       within size: Int) throws(AppNorthError) -> Int? {
        let whole = try conn.query("SELECT 1 FROM kv WHERE namespace = ? AND key = ?",
                                   [.text(importedNamespace), .text(name)]) { $0.int(0) }
        guard whole.isEmpty else { return nil }
        let progress = try conn.query("SELECT value FROM kv WHERE namespace = ? AND key = ?",
                                      [.text(progressNamespace), .text(name)]) { $0.blob(0) }
        guard let value = progress.first, value.count <= 20, let offset = Int(String(decoding: value, as: UTF8.self)) else { return 0 }
        return min(max(0, offset), size)
    }

    /// The kv namespaces of the marks `importJournals` leaves: files
    /// imported whole, and files imported in part (the value: the offset
    /// of the first record not imported, in decimal). Two namespaces, so
    /// that a library from before imports in parts, finding a file with a
    /// progress mark, imports it whole (the server drops the copies by
    /// event id) rather than deleting it as imported.
    static let importedNamespace = "events_journal_imported"
    static let progressNamespace = "events_journal_progress"

    /// Imports the journals that dead processes left (nobody holds their
    /// lock), removes half-created ones, and forgets marks of files that
    /// are gone. Runs at open and, from the upload thread, every 10 s.
    func recoverOrphans() throws(AppNorthError) {
        for name in journal.journalNames(creating: true) {
            let path = journal.directory.file(name)
            if let fd = EventJournal.claimOrphan(path) {
                unlink(path)
                close(fd)
            }
        }
        var imported = 0
        var settled: [String] = []
        // Claimed (and so locked) until imported; in groups, so that a
        // directory full of them never holds every descriptor at once.
        var claimed: [(fd: Int32, file: JournalFile)] = []
        func importClaimed() throws(AppNorthError) {
            defer {
                for entry in claimed { close(entry.fd) }
                claimed.removeAll()
            }
            if !claimed.isEmpty {
                // Files are not in the journal's totals: nothing to settle.
                let parts = try importJournals(claimed.map(\.file), &settled)
                imported += parts.reduce(0) { $0 + $1.records }
            }
        }
        for name in journal.journalNames() {
            let path = journal.directory.file(name)
            guard let fd = EventJournal.claimOrphan(path) else { continue }
            // A file that cannot be read is left for the next scan: it
            // must not fail the open, or stop every upload cycle, for the
            // events that are readable.
            let contents: [UInt8]
            do {
                contents = try EventJournal.readAll(fd, path)
            } catch {
                close(fd)
                logger.log(.warning, "event queue: skipped a journal an ended process left: \(error.message)")
                continue
            }
            claimed.append((fd, JournalFile(name: name, path: path, contents: contents)))
            if claimed.count >= 32 { try importClaimed() }
        }
        try importClaimed()
        if imported > 0 { logger.log(.info, "event queue: recovered \(imported) event(s) from the journal of an ended process") }
        let marks = try db.withConnection { conn throws(AppNorthError) in
            try conn.query("SELECT namespace, key FROM kv WHERE namespace IN (?, ?)",
                           [.text(Self.importedNamespace), .text(Self.progressNamespace)]) { ($0.text(0), $0.text(1)) }
        }
        // Marks of deleted files: this scan's, and any a process left when
        // it ended (or closed) before its next import dropped them.
        for (namespace, name) in marks where access(journal.directory.file(name), F_OK) != 0 && errno == ENOENT {
            try? db.kvDelete(namespace: namespace, key: name)
        }
        draining.withLock { $0.lastScanMono = Self.monotonicNanoseconds() }
    }

    /// `recoverOrphans` when the last look is 10 s old.
    func recoverOrphansIfDue() throws(AppNorthError) {
        let due = draining.withLock { Self.monotonicNanoseconds() &- $0.lastScanMono >= 10_000_000_000 }
        if due { try recoverOrphans() }
    }

    /// The orphan scan's timer runs on the real clock (an injected clock
    /// does not move on its own); SystemClock's reading saturates.
    private static func monotonicNanoseconds() -> UInt64 { SystemClock().monotonicNanoseconds() }

    /// Drops the oldest rows until both limits hold (journal records
    /// count too, being newer); returns how many. One transaction: the rows
    /// to drop are found oldest first, then deleted by one statement.
    private func dropOldest(maxCount: Int, maxBytes: Int) throws(AppNorthError) -> Int {
        // The common case, within both limits, costs no connection lock.
        let queued = self.queued
        guard queued.count > maxCount || queued.bytes > maxBytes else { return 0 }
        let (gone, size) = try db.transaction { conn throws(AppNorthError) -> (Int, Int) in
            // Read again with the connection held: an upload's deletions
            // (which update the totals with it held) are all counted.
            let queued = self.queued
            var excessCount = queued.count - maxCount, excessBytes = queued.bytes - maxBytes
            var through: Int64?
            while excessCount > 0 || excessBytes > 0 {
                let rows = try conn.query("SELECT seq, length(payload) FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                                          [.int(through ?? Int64.min), .int(Int64(max(excessCount, 0) + 64))]) {
                    ($0.int64(0), $0.int(1))
                }
                for (seq, size) in rows where excessCount > 0 || excessBytes > 0 {
                    through = seq
                    excessCount -= 1
                    excessBytes -= size
                }
                if rows.isEmpty { break }
            }
            guard let through else { return (0, 0) }
            let sizes = try conn.query("DELETE FROM events WHERE seq <= ? RETURNING length(payload)", [.int(through)]) {
                $0.int(0)
            }
            return (sizes.count, sizes.reduce(0, +))
        }
        if gone > 0 { removals.add(1, ordering: .releasing) }
        // Counted before the queue shrinks: whoever sees the smaller queue
        // sees the count too.
        limitDropped.add(gone, ordering: .releasing)
        addToTable(-gone, -size)
        return gone
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
                let gone = try conn.query("DELETE FROM events WHERE seq = ? RETURNING length(payload)", [.int(row.seq)]) {
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
            let gone = try conn.query("DELETE FROM events WHERE seq BETWEEN ? AND ? RETURNING length(payload)",
                                      [.int(first), .int(last)]) { $0.int(0) }
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
                    sizes += try conn.query("DELETE FROM events WHERE id = ? RETURNING length(payload)", [.text(id)]) { $0.int(0) }
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
                return (epoch, try conn.query("DELETE FROM events RETURNING length(payload)") { $0.int(0) })
            }
            addToTable(-sizes.count, -sizes.reduce(0, +))
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
            unlink(segment.path)
            journal.settle(segment)
        }
        state.retired.removeAll()
        state.contents.removeAll()
        return gone
    }
}
