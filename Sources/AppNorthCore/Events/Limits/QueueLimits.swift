import Glibc
import Synchronization


/// The limits of the data directory (10,000 events and 5 MB by default):
/// they count everything queued there, whoever tracked it: the table, this
/// handle's journal, and every other handle's and process's journal files.
/// Past a limit the oldest by tracked time (the UUIDv7 id's milliseconds,
/// then the id) go first, wherever they wait: table rows are deleted, and
/// another handle's journal gets a progress mark past its records that
/// go, which its owner (or whoever recovers the file) then skips.
///
/// Rows of a batch in flight (or delivered and not yet deleted) are leased
/// (`BatchLease`): a trim deletes them like any other but does not count
/// them; the lease's owner counts those of a failed attempt, so an event is
/// never both counted as dropped and delivered. A batch whose rows a trim
/// deleted while it waited for a retry is read again before its next
/// attempt (`lease` returns what is left), so it is not sent.
final class QueueLimits: Sendable {
    let table: EventTable
    let journal: EventJournal
    /// The largest journal file read (`EventJournal.largestFile`): an
    /// ended process's larger one is set aside, another's not counted.
    let largestJournal: Int
    /// Rows dropped past the limits since open (`queue_limit`). Counted with
    /// the deletion, in the drain's turn, so that a caller that waited for
    /// another thread's trim, or saw the queue it left, sees its count too.
    let dropped = DropCount()
    /// This handle's key for the lease of its batch in flight.
    let leaseKey = String(getpid()) + "-" + Random.hexToken(bytes: 8)
    /// The first row of a delivered batch not deleted yet (Int64.max:
    /// none): the lease reaches down to it.
    let leaseFloor = Atomic<Int64>(Int64.max)
    /// The last attempt was delivered and its stored lease not settled
    /// yet: the next lease or the release settles it as delivered, in its
    /// own transaction (`endAttempt`). Only the upload thread uses it.
    let deliveredUnsettled = Atomic<Bool>(false)
    /// The last listing of the journal files (`journalNames`): its own
    /// leaf lock, nothing taken inside.
    let listing = Lock<JournalListing?>(nil, level: LockClass.journalListing)
    /// The database file's bytes at the last drain (`fitWAL`), for
    /// `track`'s look at the files: its free pages count until reused.
    let databaseFile = Atomic<Int>(0)
    /// Every journal file's bytes in the directory, whoever wrote it, at
    /// the last look (`journalFiles`), and this handle's journaled bytes
    /// then (-1: no look yet).
    let journalFilesSeen = Atomic<Int>(0)
    let journalFilesAt = Atomic<Int>(-1)
    /// Whether another handle or process writes beside this one: set when
    /// a drain (`fitWAL`) or `track`'s look (`lookAtFiles`) finds events in
    /// another's journal, cleared by a drain that finds no other journal
    /// file. While set, the WAL is kept tight and the rows get eight
    /// tenths (`FileBudget.sharedRowBytes`).
    let shared = Atomic<Bool>(false)
    /// `track`'s queued count (its own view: the table at its last count
    /// and this handle's journal) at its last count of the whole directory
    /// while `shared` (`EventTracker.keepSharedWithinLimits`).
    let countCheckedAt = Atomic<Int>(0)
    /// The other journal files as `isOver` last read them (`JournalScan`).
    let scans = Lock<[String: JournalScan]>([:], level: LockClass.foreignScans)

    init(table: EventTable, journal: EventJournal, largestJournal: Int) {
        self.table = table
        self.journal = journal
        self.largestJournal = largestJournal
    }

    /// The journal files in the directory (but `own`) with the records they
    /// still hold for the queue: none for a file marked imported whole, or one
    /// from before the latest revocation of consent (it will be purged).
    func foreignJournals(_ conn: SQLiteStore.Connection, own: Set<String>) throws(AppNorthError) -> [ForeignJournal] {
        var found: [ForeignJournal] = []
        for name in try foreignJournalNames(conn, own: own) {
            try withForeignJournal(conn, name) { _, reader, start in
                var file = ForeignJournal(name: name)
                var position = start
                while let next = try? reader.next(from: position), let event = next.event {
                    file.records.append((event.milliseconds, event.id, RowCost.bytes(payload: event.payload.count), next.end))
                    position = next.end
                }
                if !file.records.isEmpty { found.append(file) }
            }
        }
        return found
    }

    /// The journal files the queue counts besides `own`: those of the
    /// current consent epoch (an older one will be purged).
    func foreignJournalNames(_ conn: SQLiteStore.Connection, own: Set<String>) throws(AppNorthError) -> [String] {
        let revocations = try ConsentRecord.revocations(conn)
        return journalNames().filter { !own.contains($0) && EventJournal.epoch(ofName: $0) == revocations }
    }

    /// Runs `body` with another journal file open (its `stat`, a reader of
    /// it, and its progress mark), unless it is gone, larger than the
    /// limits allow (an ended process's is set aside by recovery), or
    /// marked imported whole. The file is read a window at a time.
    func withForeignJournal(_ conn: SQLiteStore.Connection, _ name: String,
                            _ body: (stat, JournalReader, Int) -> Void) throws(AppNorthError) {
        guard let fd = try? journal.directory.openExisting(name) else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, let reader = try? JournalReader(fd: fd, path: journal.directory.file(name)),
              reader.size <= largestJournal,
              let start = try EventImporter.importedOffset(conn, name, within: reader.size) else { return }
        body(info, reader, start)
    }

    /// The directory's queue, in the drain's turn (never between an
    /// import's two counters) with the connection held: the table, and
    /// every journal file as it is on disk from its progress mark on, this
    /// handle's own included (a trim may then drop the oldest of them too,
    /// by the same mark, whether or not this handle imported its journal
    /// first: another process may have tracked in between).
    func takeCensus(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> Census {
        try table.refreshTotals(conn)
        let files = try foreignJournals(conn, own: [])
        return Census(count: table.count.load(ordering: .relaxed) + files.reduce(0) { $0 + $1.records.count },
                      bytes: table.bytes.load(ordering: .relaxed) + files.reduce(0) { $0 + $1.bytes },
                      foreign: files, journals: journalNames().count)
    }

    /// Whether the directory may be past a limit (in the drain's turn),
    /// without reading this handle's own journal (`own`): the table as
    /// SQLite has it, this handle's unimported records from its counters
    /// (never fewer than its files hold), and the other journal files,
    /// read only if any, and only what they gained since the last count
    /// (`countForeign`). Never false when the census would say over; a
    /// true is settled by the census (`trim`). Reading the own journal's
    /// rest on every drain made a flush quadratic in the journal (#32).
    func isOver(_ limits: (count: Int, bytes: Int), own: Set<String>) throws(AppNorthError) -> Bool {
        try table.db.withConnection { conn throws(AppNorthError) -> Bool in
            try table.refreshTotals(conn)
            let others = try countForeign(conn, own: own)
            let pending = journal.pending
            let count = table.count.load(ordering: .relaxed) + pending.records + others.records
            let bytes = table.bytes.load(ordering: .relaxed) + pending.bytes + others.bytes
            return count > limits.count || bytes > limits.bytes
        }
    }

    /// Sets the WAL's checkpoint interval for what the files may hold
    /// until the next drain (`FileBudget.walPages`,
    /// `FileBudget.filesUntilNextDrain`): the table, or the database file
    /// when larger (its free pages stay until the queue empties), this
    /// handle's unimported events going in, and the journal files, which
    /// stay whole until imported and grow beside the import. Called in
    /// the drain's turn once its journal files are rotated out, so that
    /// what it imports is counted. A WAL left large by a roomy interval is
    /// cut back only after a checkpoint, so this looks ahead.
    /// `own`: this handle's journal files. Another handle's or process's
    /// journal (a file not `own`) may grow and go in while this one does,
    /// both copies at once: while `shared`, the WAL is kept tight (#32).
    func fitWAL(rowLimit: Int, own: Set<String>) throws(AppNorthError) {
        var journals = 0, others = 0, otherFiles = 0
        for name in journalNames() {
            let size = journal.directory.fileSize(name)
            journals += size
            if !own.contains(name) { others += size; otherFiles += 1 }
        }
        // Shared from the first events in another's journal until no other
        // journal is left (its owner closed): a flag that followed each
        // drain's look flipped back whenever the other had just imported.
        let sharing = others > 0 || (otherFiles > 0 && shared.load(ordering: .relaxed))
        try table.db.withConnection { conn throws(AppNorthError) in
            let database = table.db.databaseBytes
            databaseFile.store(database, ordering: .relaxed)
            let base = max(table.bytes.load(ordering: .relaxed), database)
            let filled = sharing ? rowLimit : FileBudget.filesUntilNextDrain(base: base, journals: journals,
                                                                             pending: journal.pending.bytes, rowLimit: rowLimit)
            // Written only when it changes: every `track` reads it.
            if shared.load(ordering: .relaxed) != sharing { shared.store(sharing, ordering: .relaxed) }
            try table.db.setWALPages(FileBudget.walPages(files: filled, rowLimit: rowLimit), shared: sharing, conn)
        }
    }

    /// Drops the oldest events of the directory until both limits hold;
    /// returns how many (counted in `limitDropped`). One transaction: the
    /// census, then the oldest found by merging the table (by id) with
    /// every other journal's records (in file order), skipping leased rows.
    /// Called in the drain's turn (`EventImporter`), after this handle's
    /// journal went in; `own`: this handle's journal files.
    func trim(to bounds: (count: Int, bytes: Int), own: Set<String>) throws(AppNorthError) -> Int {
        let limits = shared.load(ordering: .relaxed) ? (count: bounds.count, bytes: FileBudget.sharedRowBytes(bounds.bytes)) : bounds
        guard try isOver(limits, own: own) else { return 0 }
        let gone = try table.db.transaction { conn throws(AppNorthError) -> Int in
            let census = try takeCensus(conn)
            var excess = (census.count - limits.count, census.bytes - limits.bytes)
            guard excess.0 > 0 || excess.1 > 0 else { return 0 }
            let leases = try activeLeases(conn)
            var rows = TrimCursor(leases: leases.map(\.lease))
            var taken = [Int](repeating: 0, count: census.foreign.count)
            // Only rows no lease protects: a leased one is its owner's to
            // count, when its attempt ends (BatchLease).
            var dropped = 0
            while excess.0 > 0 || excess.1 > 0 {
                try rows.fill(conn)
                var oldest: Int?  // nil: the table's head
                var best = rows.head.map { ($0.ms, $0.id) }
                for (index, file) in census.foreign.enumerated() where taken[index] < file.records.count {
                    let head = file.records[taken[index]]
                    if let current = best, current <= (head.ms, head.id) { continue }
                    best = (head.ms, head.id)
                    oldest = index
                }
                guard best != nil else { break }
                let size: Int
                if let index = oldest {
                    size = census.foreign[index].records[taken[index]].size
                    taken[index] += 1
                    dropped += 1
                } else {
                    let row = rows.take()
                    size = row.size
                    if !row.leased { dropped += 1 }
                }
                excess.0 -= 1
                excess.1 -= size
            }
            try rows.delete(conn, table)
            for (index, count) in rows.owed {
                var lease = leases[index].lease
                lease.owed += count
                try putLease(conn, key: leases[index].key, lease, touch: false)
            }
            for (index, file) in census.foreign.enumerated() where taken[index] > 0 {
                try conn.kvPut(EventImporter.progressNamespace, file.name, Array(String(file.records[taken[index] - 1].end).utf8),
                               updatedMs: 0)
            }
            // Stored with the deletion: the directory's drops outlive the handle.
            if dropped > 0 { try conn.run("UPDATE events_totals SET dropped = dropped + ? WHERE id = 1", [.int(Int64(dropped))]) }
            return dropped
        }
        if gone > 0 { table.removals.add(1, ordering: .releasing) }
        dropped.add(gone)
        return gone
    }
}

/// Another journal file, read as it is now (`QueueLimits`): its records not imported yet
/// (from its progress mark on).
struct ForeignJournal {
    let name: String
    var records: [(ms: Int64, id: String, size: Int, end: Int)] = []
    var bytes: Int { records.reduce(0) { $0 + $1.size } }
}

/// What the data directory holds, exactly (`QueueLimits`): the table as SQLite has it,
/// this handle's journal, and the other journals.
struct Census {
    var count: Int
    var bytes: Int
    var foreign: [ForeignJournal]
    var journals: Int
}

/// The table's rows oldest first by tracked time (the id's first 13
/// characters: its milliseconds), then in table order (which keeps a
/// thread's events of one millisecond in the order it tracked them),
/// fetched a page at a time, leased ones skipped.
struct TrimCursor {
    let leases: [BatchLease]
    var rows: [(seq: Int64, id: String, ms: Int64, size: Int)] = []
    var index = 0
    var exhausted = false
    var taken: [Int64] = []
    /// Rows taken in an attempt, per lease.
    var owed: [Int: Int] = [:]
    /// The last id read (in the index's order).
    var after = ""

    init(leases: [BatchLease]) { self.leases = leases }

    var head: (seq: Int64, id: String, ms: Int64, size: Int)? { index < rows.count ? rows[index] : nil }

    /// The next page in the `id` index's order (the ids' first 13
    /// characters, their millisecond, sort as the times do), completed to
    /// the end of its last millisecond, then ordered by (millisecond,
    /// seq): a search of the index, where ordering by the expression
    /// scanned and sorted the whole table for every page (13.3 ms against
    /// 1.7 ms a page of a 10,000-row table, SQLite 3.40).
    mutating func fill(_ conn: SQLiteStore.Connection) throws(AppNorthError) {
        while index == rows.count && !exhausted {
            let select = "SELECT seq, id, length(payload), substr(id, 1, 13) FROM events "
            var page = try conn.query(select + "WHERE id > ? ORDER BY id LIMIT 512", [.text(after)]) {
                ($0.int64(0), $0.text(1), RowCost.bytes(payload: $0.int(2)), $0.text(3))
            }
            exhausted = page.count < 512
            if !exhausted, let last = page.last {
                // U+10FFFF's bytes sort after every character's (BINARY collation).
                page += try conn.query(select + "WHERE id > ? AND id < ? ORDER BY id", [.text(last.1), .text(last.3 + "\u{10FFFF}")]) {
                    ($0.int64(0), $0.text(1), RowCost.bytes(payload: $0.int(2)), $0.text(3))
                }
            }
            if let last = page.last { after = last.1 }
            page.sort { ($0.3, $0.0) < ($1.3, $1.0) }
            rows = page.map { ($0.0, $0.1, JournalRecord.Event(id: $0.1, payload: []).milliseconds, $0.2) }
            index = 0
        }
    }

    /// Takes the head (deleted). `leased`: a lease protects it, so it
    /// is not this trim's drop: one in an attempt is noted on its
    /// lease (`owed`), for the attempt's end to count; one delivered
    /// is gone already.
    mutating func take() -> (size: Int, leased: Bool) {
        let row = rows[index]
        index += 1
        taken.append(row.seq)
        guard let lease = leases.firstIndex(where: { $0.covers(row.seq) }) else { return (row.size, false) }
        if leases[lease].isInAttempt(row.seq) { owed[lease, default: 0] += 1 }
        return (row.size, true)
    }

    /// Deletes every row taken.
    func delete(_ conn: SQLiteStore.Connection, _ table: EventTable) throws(AppNorthError) {
        var count = 0, bytes = 0
        for seq in taken {
            let sizes = try conn.take(from: "events", where: "seq = ?", [.int(seq)], returning: "length(payload)") { RowCost.bytes(payload: $0.int(0)) }
            count += sizes.count
            bytes += sizes.reduce(0, +)
        }
        table.add(-count, -bytes)
    }
}

extension LockClass {
    /// `QueueLimits.scans`: the other journal files as last counted.
    static let foreignScans = LockClass.leaf("QueueLimits.scans")
    /// `QueueLimits.listing`: the journal files listed last.
    static let journalListing = LockClass.leaf("QueueLimits.listing")
}
