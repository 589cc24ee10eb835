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
