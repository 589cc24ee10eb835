import Synchronization

/// The leases in the database: a trim reads every handle's (`BatchLease`).
extension QueueLimits {
    static let leaseNamespace = Schema.Namespace.eventsLease
    /// A lease older than this belongs to a process that died mid-request
    /// (requests time out after 30 s).
    static let leaseLifetimeMs: Int64 = 120_000

    /// The leases of every handle, as a trim sees them.
    func activeLeases(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> [(key: String, lease: BatchLease)] {
        try conn.kvRows(Self.leaseNamespace, updatedAfter: SystemClock().wallMilliseconds() - Self.leaseLifetimeMs).compactMap { key, value in
            BatchLease(parsing: String(decoding: value, as: UTF8.self)).map { (key, $0) }
        }
    }

    /// Stores a lease; `touch`: as of now (an attempt begins), else keeping its time.
    func putLease(_ conn: SQLiteStore.Connection, key: String, _ lease: BatchLease, touch: Bool) throws(AppNorthError) {
        if touch {
            try conn.kvPut(Self.leaseNamespace, key, Array(lease.value.utf8), updatedMs: SystemClock().wallMilliseconds())
        } else {
            try conn.kvReplaceValue(Self.leaseNamespace, key, Array(lease.value.utf8))
        }
    }

    /// This handle's lease, if any.
    func ownLease(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> BatchLease? {
        try conn.kvValue(Self.leaseNamespace, leaseKey).flatMap { BatchLease(parsing: String(decoding: $0, as: UTF8.self)) }
    }

    /// Ends this handle's attempt, if one is leased, in one transaction:
    /// `delivered` or not, its verdict on the rows a trim deleted under it
    /// is counted now (`BatchLease.ended`), once: the stored lease no
    /// longer holds them. `release`: nothing stays leased.
    private func settleLease(delivered: Bool, release: Bool) throws(AppNorthError) {
        let delivered = delivered || deliveredUnsettled.load(ordering: .relaxed)
        let owed = try table.db.transaction { conn throws(AppNorthError) -> Int in
            guard let lease = try ownLease(conn) else { return 0 }
            let (rest, dropped) = lease.ended(delivered: delivered)
            if let rest, !release {
                try putLease(conn, key: leaseKey, rest, touch: false)
            } else {
                try conn.kvDelete(Self.leaseNamespace, leaseKey)
            }
            return dropped
        }
        deliveredUnsettled.store(false, ordering: .relaxed)
        self.dropped.add(owed)
    }

    /// Before an attempt: the rows of `batch` still queued (a trim, a
    /// purge or another handle may have deleted some since it was read),
    /// leased for the attempt from `floor` (a delivered batch not deleted
    /// yet) to its last row, in one transaction. An empty result leases
    /// nothing new. The previous attempt ends here: as delivered if it was
    /// (`deliveredUnsettled`), else as failed if not ended (`endAttempt`).
    func lease(_ batch: [StoredEvent], from floor: Int64?) throws(AppNorthError) -> [StoredEvent] {
        guard let first = batch.first?.seq, let last = batch.last?.seq else { return [] }
        let delivered = deliveredUnsettled.load(ordering: .relaxed)
        let (rest, owed) = try table.db.transaction { conn throws(AppNorthError) -> ([StoredEvent], Int) in
            var dropped = 0
            var kept: BatchLease?
            if let previous = try ownLease(conn) { (kept, dropped) = previous.ended(delivered: delivered) }
            let rest = try Self.stillQueued(batch, first, last, conn)
            if let start = rest.first?.seq {
                try putLease(conn, key: leaseKey, BatchLease(attempt: start, through: last, floor: floor), touch: true)
            } else if let kept {
                try putLease(conn, key: leaseKey, kept, touch: false)
            } else {
                try conn.kvDelete(Self.leaseNamespace, leaseKey)
            }
            return (rest, dropped)
        }
        deliveredUnsettled.store(false, ordering: .relaxed)
        self.dropped.add(owed)
        return rest
    }

    /// The rows of `batch` (`first...last`, read in seq order) still in the
    /// table. Rows only leave it, and new rows get higher seqs, so as many
    /// rows in the range as in the batch means all of them: one count,
    /// no list, in the usual case.
    private static func stillQueued(_ batch: [StoredEvent], _ first: Int64, _ last: Int64,
                                    _ conn: SQLiteStore.Connection) throws(AppNorthError) -> [StoredEvent] {
        let range: [SQLiteStore.Value] = [.int(first), .int(last)]
        let count = try conn.query("SELECT count(*) FROM events WHERE seq BETWEEN ? AND ?", range) { $0.int64(0) }.first
        if count == Int64(batch.count) { return batch }
        let present = Set(try conn.query("SELECT seq FROM events WHERE seq BETWEEN ? AND ?", range) { $0.int64(0) })
        return batch.filter { present.contains($0.seq) }
    }

    /// The attempt's verdict (`delivered`: the server accepted the batch):
    /// counts the rows a trim deleted under it if it failed, and unleases
    /// its rows (a failed batch waits for its retry unleased: past a
    /// limit, a trim may drop it), keeping the delivered ones not deleted
    /// yet leased. A delivery is settled by the next lease or the release
    /// instead, in their transaction: one write fewer between two batches.
    /// Until then a trim sees the rows still in the attempt, counts those
    /// it deletes as owed, and that settlement owes nothing for them: the
    /// same as deleting delivered rows.
    func endAttempt(delivered: Bool) {
        if delivered { return deliveredUnsettled.store(true, ordering: .relaxed) }
        do { try settleLease(delivered: delivered, release: false) } catch {
            table.logger.log(.warning, "event queue: cannot end the lease of a batch: \(error.message)")
        }
    }

    /// Ends this handle's lease (the cycle is over): an attempt not ended
    /// counts as failed.
    func releaseLease() {
        do { try settleLease(delivered: false, release: true) } catch {
            table.logger.log(.warning, "event queue: cannot release the lease of a batch: \(error.message)")
        }
    }
}
