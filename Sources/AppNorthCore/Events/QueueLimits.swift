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
extension EventStore {
    /// A journal file, read as it is now: its records not imported yet
    /// (from its progress mark on).
    struct ForeignJournal {
        let name: String
        var records: [(ms: Int64, id: String, size: Int, end: Int)] = []
        var bytes: Int { records.reduce(0) { $0 + $1.size } }
    }

    /// What the data directory holds, exactly: the table as SQLite has it,
    /// this handle's journal, and the other journals.
    struct Census {
        var count: Int
        var bytes: Int
        var foreign: [ForeignJournal]
        var journals: Int
    }

    /// The table's totals as SQLite holds them: counted again when another
    /// connection (another handle or process) has committed since the last
    /// look (`PRAGMA data_version`); this handle's own changes move the
    /// counters as they commit. Called with the connection held.
    func refreshTableTotals(_ conn: SQLiteStore.Connection) throws(AppNorthError) {
        let version = try conn.query("PRAGMA data_version") { $0.int(0) }.first ?? -1
        guard version != dataVersion.load(ordering: .relaxed) else { return }
        let row = try conn.query("SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM events") {
            ($0.int(0), $0.int(1))
        }.first
        tableCount.store(row?.0 ?? 0, ordering: .relaxed)
        tableBytes.store(row?.1 ?? 0, ordering: .relaxed)
        dataVersion.store(version, ordering: .relaxed)
    }

    /// The journal files in the directory (but `own`) with the records they
    /// still hold for the queue: none for a file marked imported whole, or one
    /// from before the latest revocation of consent (it will be purged).
    func foreignJournals(_ conn: SQLiteStore.Connection, own: Set<String>) throws(AppNorthError) -> [ForeignJournal] {
        let revocations = try ConsentRecord.revocations(conn)
        var found: [ForeignJournal] = []
        for name in journal.journalNames() where !own.contains(name) && EventJournal.epoch(ofName: name) == revocations {
            // Read a window at a time; a file larger than the limits allow
            // is not counted (an ended process's is set aside by recovery).
            guard let fd = try? journal.directory.openExisting(name) else { continue }
            defer { close(fd) }
            guard let reader = try? JournalReader(fd: fd, path: journal.directory.file(name)),
                  reader.size <= largestJournal,
                  let start = try Self.importedOffset(conn, name, within: reader.size) else { continue }
            var file = ForeignJournal(name: name)
            var position = start
            while let next = try? reader.next(from: position), let event = next.event {
                file.records.append((event.milliseconds, event.id, event.payload.count, next.end))
                position = next.end
            }
            if !file.records.isEmpty { found.append(file) }
        }
        return found
    }

    /// The directory's queue, under the drain lock (never between an
    /// import's two counters) with the connection held: the table, and
    /// every journal file as it is on disk from its progress mark on, this
    /// handle's own included (a trim may then drop the oldest of them too,
    /// by the same mark, whether or not this handle imported its journal
    /// first: another process may have tracked in between).
    func takeCensus(_ state: DrainState, _ conn: SQLiteStore.Connection) throws(AppNorthError) -> Census {
        try refreshTableTotals(conn)
        let files = try foreignJournals(conn, own: [])
        return Census(count: tableCount.load(ordering: .relaxed) + files.reduce(0) { $0 + $1.records.count },
                      bytes: tableBytes.load(ordering: .relaxed) + files.reduce(0) { $0 + $1.bytes },
                      foreign: files, journals: journal.journalNames().count)
    }

    /// What the host reads (stats, the queued count): the directory's queue.
    var directoryQueued: Census {
        let census = try? draining.withLock { state throws(AppNorthError) -> Census in
            try db.withConnection { conn throws(AppNorthError) in try takeCensus(state, conn) }
        }
        let queued = self.queued
        return census ?? Census(count: queued.count, bytes: queued.bytes, foreign: [], journals: 0)
    }

    /// Whether the directory may be past a limit (under the drain lock),
    /// without reading this handle's own journal: the table as SQLite has
    /// it, this handle's unimported records from its counters (never fewer
    /// than its files hold), and the other journal files, read only if
    /// any. Never false when the census would say over; a true is settled
    /// by the census (`trimDirectory`). Reading the own journal's rest on
    /// every drain made a flush quadratic in the journal (#32).
    func isOverLimits(_ state: DrainState, _ limits: (count: Int, bytes: Int)) throws(AppNorthError) -> Bool {
        var own = Set(state.retired.map(\.name))
        for stripe in journal.stripes {
            if let name = stripe.state.withLock({ $0.segment?.name }) { own.insert(name) }
        }
        return try db.withConnection { conn throws(AppNorthError) -> Bool in
            try refreshTableTotals(conn)
            let others = try foreignJournals(conn, own: own)
            let pending = journal.pending
            let count = tableCount.load(ordering: .relaxed) + pending.records + others.reduce(0) { $0 + $1.records.count }
            let bytes = tableBytes.load(ordering: .relaxed) + pending.bytes + others.reduce(0) { $0 + $1.bytes }
            return count > limits.count || bytes > limits.bytes
        }
    }

    /// Before an attempt: past a limit of the directory, trims now, so
    /// that no batch goes out while the directory holds more than its
    /// limits (another process may have filled it since the batch was
    /// read). Checked cheaply first (`isOverLimits`).
    func trimIfOverLimits(_ limits: (count: Int, bytes: Int)) throws(AppNorthError) {
        if try draining.withLock({ state throws(AppNorthError) in try isOverLimits(state, limits) }) {
            try drain(trimmingTo: limits)
        }
    }

    /// Drops the oldest events of the directory until both limits hold;
    /// returns how many (counted in `limitDropped`). One transaction: the
    /// census, then the oldest found by merging the table (by id) with
    /// every other journal's records (in file order), skipping leased rows.
    /// Called under the drain lock, after this handle's journal went in.
    func trimDirectory(_ state: DrainState, _ limits: (count: Int, bytes: Int)) throws(AppNorthError) -> Int {
        guard try isOverLimits(state, limits) else { return 0 }
        let gone = try db.transaction { conn throws(AppNorthError) -> Int in
            let census = try takeCensus(state, conn)
            var excess = (census.count - limits.count, census.bytes - limits.bytes)
            guard excess.0 > 0 || excess.1 > 0 else { return 0 }
            let leases = try activeLeases(conn)
            var table = TableCursor(leases: leases.map(\.lease))
            var taken = [Int](repeating: 0, count: census.foreign.count)
            // Only rows no lease protects: a leased one is its owner's to
            // count, when its attempt ends (BatchLease).
            var dropped = 0
            while excess.0 > 0 || excess.1 > 0 {
                try table.fill(conn)
                var oldest: Int?  // nil: the table's head
                var best = table.head.map { ($0.ms, $0.id) }
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
                    let row = table.take()
                    size = row.size
                    if !row.leased { dropped += 1 }
                }
                excess.0 -= 1
                excess.1 -= size
            }
            try table.delete(conn, self)
            for (index, count) in table.owed {
                var lease = leases[index].lease
                lease.owed += count
                try putLease(conn, key: leases[index].key, lease, touch: false)
            }
            for (index, file) in census.foreign.enumerated() where taken[index] > 0 {
                try conn.kvPut(Self.progressNamespace, file.name, Array(String(file.records[taken[index] - 1].end).utf8),
                               updatedMs: 0)
            }
            return dropped
        }
        if gone > 0 { removals.add(1, ordering: .releasing) }
        limitDropped.add(gone)
        return gone
    }

    /// The table's rows oldest first by tracked time (the id's first 13
    /// characters: its milliseconds), then in table order (which keeps a
    /// thread's events of one millisecond in the order it tracked them),
    /// fetched a page at a time, leased ones skipped.
    struct TableCursor {
        let leases: [BatchLease]
        var rows: [(seq: Int64, id: String, ms: Int64, size: Int)] = []
        var index = 0
        var exhausted = false
        var taken: [Int64] = []
        /// Rows taken in an attempt, per lease.
        var owed: [Int: Int] = [:]
        var after: (String, Int64) = ("", Int64.min)

        init(leases: [BatchLease]) { self.leases = leases }

        var head: (seq: Int64, id: String, ms: Int64, size: Int)? { index < rows.count ? rows[index] : nil }

        mutating func fill(_ conn: SQLiteStore.Connection) throws(AppNorthError) {
            while index == rows.count && !exhausted {
                let page = try conn.query("SELECT seq, id, length(payload), substr(id, 1, 13) AS t FROM events "
                                          + "WHERE (substr(id, 1, 13), seq) > (?, ?) ORDER BY t, seq LIMIT 512",
                                          [.text(after.0), .int(after.1)]) { ($0.int64(0), $0.text(1), $0.int(2), $0.text(3)) }
                exhausted = page.count < 512
                if let last = page.last { after = (last.3, last.0) }
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
        func delete(_ conn: SQLiteStore.Connection, _ store: EventStore) throws(AppNorthError) {
            var count = 0, bytes = 0
            for seq in taken {
                let sizes = try conn.take(from: "events", where: "seq = ?", [.int(seq)], returning: "length(payload)") { $0.int(0) }
                count += sizes.count
                bytes += sizes.reduce(0, +)
            }
            store.addToTable(-count, -bytes)
        }
    }

    /// The bytes the event store occupies: the database and its WAL, and
    /// every journal file in the directory.
    var bytesOnDisk: Int {
        var total = db.bytesOnDisk
        for name in journal.journalNames() { total += journal.directory.fileSize(name) }
        return total
    }

    static func wallMilliseconds() -> Int64 { SystemClock().wallMilliseconds() }
}
