import Synchronization

/// The lease of one handle's batch (a kv row `events_lease`, keyed by the
/// handle), as a value: which rows a trim must not count as its own
/// drops, and the verdict those it deleted anyway still wait for.
///
/// `low...high` are protected. Rows below `from` were delivered and are
/// not deleted yet (a trim deletes them as delivered, counted by nobody);
/// rows from `from` on are in the attempt now. A trim that deletes one of
/// those adds it to `owed`: the attempt's end decides, once, what it was
/// (`ended`). Nothing is ever taken back, so a count of drops made of
/// these cannot go below zero.
///
/// Stored as `low:high:owed:0:from`, decimal. (The 0 is where libraries
/// before this one kept the rows they had counted early; they read `owed`
/// at the same place.)
struct BatchLease: Equatable, Sendable {
    var low: Int64
    var high: Int64
    var from: Int64
    var owed: Int = 0

    /// A lease of an attempt on `first...last`, whose delivered rows not
    /// deleted yet begin at `floor`.
    init(attempt first: Int64, through last: Int64, floor: Int64? = nil) {
        low = min(first, floor ?? first)
        high = max(first, last)
        from = first
    }

    init(low: Int64, high: Int64, from: Int64, owed: Int) {
        self.low = low
        self.high = high
        self.from = from
        self.owed = owed
    }

    /// A stored value, checked: nil when it is not one (ignored). A value
    /// without `from` (an older library's) is all in its attempt.
    init?(parsing value: String) {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, let low = Int64(parts[0]), let high = Int64(parts[1]), low <= high else { return nil }
        self.low = low
        self.high = high
        owed = parts.count > 2 ? Int(exactly: UInt32(parts[2]) ?? 0) ?? 0 : 0
        let from = parts.count > 4 ? Int64(parts[4]) ?? low : low
        self.from = min(max(low, from), high == Int64.max ? high : high + 1)
    }

    var value: String { "\(low):\(high):\(owed):0:\(from)" }

    func covers(_ seq: Int64) -> Bool { low <= seq && seq <= high }

    /// Whether the row is in the attempt (its verdict is not known yet).
    func isInAttempt(_ seq: Int64) -> Bool { from <= seq && seq <= high }

    /// The attempt's end: after a delivery its rows are delivered (kept
    /// protected until deleted), and so were those a trim deleted; after a
    /// failure its rows are queued again (not leased), and those a trim
    /// deleted meanwhile were dropped: `dropped`. `rest`: what is left
    /// leased (nil: nothing).
    func ended(delivered: Bool) -> (rest: BatchLease?, dropped: Int) {
        if delivered {
            return (BatchLease(low: low, high: high, from: high == Int64.max ? high : high + 1, owed: 0), 0)
        }
        guard low < from else { return (nil, owed) }
        return (BatchLease(low: low, high: from - 1, from: from, owed: 0), owed)
    }
}

/// A count that only grows, from counts of rows (never negative).
struct DropCount: ~Copyable, Sendable {
    private let value = Atomic<Int>(0)
    init() {}
    func add(_ rows: Int) {
        guard rows > 0 else { return }
        value.add(rows, ordering: .releasing)
    }
    var count: Int { value.load(ordering: .acquiring) }
}

/// The leases in the database (QueueLimits: a trim reads every handle's).
extension EventStore {
    static let leaseNamespace = Schema.Namespace.eventsLease
    /// A lease older than this belongs to a process that died mid-request
    /// (requests time out after 30 s).
    static let leaseLifetimeMs: Int64 = 120_000

    /// The leases of every handle, as a trim sees them.
    func activeLeases(_ conn: SQLiteStore.Connection) throws(AppNorthError) -> [(key: String, lease: BatchLease)] {
        try conn.kvRows(Self.leaseNamespace, updatedAfter: Self.wallMilliseconds() - Self.leaseLifetimeMs).compactMap { key, value in
            BatchLease(parsing: String(decoding: value, as: UTF8.self)).map { (key, $0) }
        }
    }

    /// Stores a lease; `touch`: as of now (an attempt begins), else keeping its time.
    func putLease(_ conn: SQLiteStore.Connection, key: String, _ lease: BatchLease, touch: Bool) throws(AppNorthError) {
        if touch {
            try conn.kvPut(Self.leaseNamespace, key, Array(lease.value.utf8), updatedMs: Self.wallMilliseconds())
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
        let dropped = try db.transaction { conn throws(AppNorthError) -> Int in
            guard let lease = try ownLease(conn) else { return 0 }
            let (rest, dropped) = lease.ended(delivered: delivered)
            if let rest, !release {
                try putLease(conn, key: leaseKey, rest, touch: false)
            } else {
                try conn.kvDelete(Self.leaseNamespace, leaseKey)
            }
            return dropped
        }
        limitDropped.add(dropped)
    }

    /// Before an attempt: the rows of `batch` still queued (a trim, a
    /// purge or another handle may have deleted some since it was read),
    /// leased for the attempt from `floor` (a delivered batch not deleted
    /// yet) to its last row, in one transaction. An empty result leases
    /// nothing new. A previous attempt not ended (`endAttempt`) ends here
    /// as failed.
    func lease(_ batch: [StoredEvent], from floor: Int64?) throws(AppNorthError) -> [StoredEvent] {
        guard let first = batch.first?.seq, let last = batch.last?.seq else { return [] }
        let (rest, dropped) = try db.transaction { conn throws(AppNorthError) -> ([StoredEvent], Int) in
            var dropped = 0
            var kept: BatchLease?
            if let previous = try ownLease(conn) { (kept, dropped) = previous.ended(delivered: false) }
            let present = Set(try conn.query("SELECT seq FROM events WHERE seq BETWEEN ? AND ?",
                                             [.int(first), .int(last)]) { $0.int64(0) })
            let rest = present.count == batch.count ? batch : batch.filter { present.contains($0.seq) }
            if let start = rest.first?.seq {
                try putLease(conn, key: leaseKey, BatchLease(attempt: start, through: last, floor: floor), touch: true)
            } else if let kept {
                try putLease(conn, key: leaseKey, kept, touch: false)
            } else {
                try conn.kvDelete(Self.leaseNamespace, leaseKey)
            }
            return (rest, dropped)
        }
        limitDropped.add(dropped)
        return rest
    }

    /// The attempt's verdict (`delivered`: the server accepted the batch):
    /// counts the rows a trim deleted under it if it failed, and unleases
    /// its rows (a failed batch waits for its retry unleased: past a
    /// limit, a trim may drop it), keeping the delivered ones not deleted
    /// yet leased.
    func endAttempt(delivered: Bool) {
        do { try settleLease(delivered: delivered, release: false) } catch {
            logger.log(.warning, "event queue: cannot end the lease of a batch: \(error.message)")
        }
    }

    /// Ends this handle's lease (the cycle is over): an attempt not ended
    /// counts as failed.
    func releaseLease() {
        do { try settleLease(delivered: false, release: true) } catch {
            logger.log(.warning, "event queue: cannot release the lease of a batch: \(error.message)")
        }
    }
}
