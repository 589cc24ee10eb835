import Glibc

/// The lock levels of before #41 (one central list): gone. A lock now names
/// its `LockClass`, declared beside its owner.
@available(*, unavailable, renamed: "LockClass", message: """
    lock levels are lock classes now: write `level: LockClass.name`; a new lock declares its class beside its \
    owner: `extension LockClass { /// `Owner.lock`: what it guards. static let name = LockClass.leaf("Owner.lock") }` \
    (a leaf takes no lock inside), or `LockClass(rank: N, "Owner.lock")` with a free rank; then run \
    python3 scripts/lock_classes.py --write (docs/architecture.md, "Lock classes")
    """)
package typealias LockLevel = LockClass

/// A lock's place in the lock order (docs/architecture.md, "Lock classes"),
/// which every `Lock` states (`Lock.init(_:level:)` has no default):
/// - an ordered class, `LockClass(rank: R, "Owner.lock")`: a thread holding
///   a lock of rank R takes only locks of a higher rank, or leaves;
/// - a leaf, `LockClass.leaf("Owner.lock")`: a data lock that takes no lock
///   inside, none at all, except a lock whose class lists it in
///   `takenInside` (the listed pairs). Leaves are not ordered among each
///   other: two leaves never nest unless a pair says so.
///
/// Each class is declared beside the lock's owner, in an extension:
///
///     extension LockClass {
///         /// `Owner.lock`: what it guards (one line; it goes in the table).
///         static let ownerLock = LockClass.leaf("Owner.lock")
///     }
///
/// `scripts/lock_classes.py` collects them (ranks unique, pairs naming
/// leaves and making no cycle) and writes the table in docs/architecture.md
/// (`--write`; `make test-docs` fails on a stale table).
package struct LockClass: Sendable {
    /// 1...`maxRank` for an ordered class; 0 for a leaf and for `gate`.
    let rank: Int
    let isLeaf: Bool
    /// The lock, for a violation's message ("Owner.lock").
    let name: StaticString
    /// The leaves this lock may be taken inside (by their names).
    let takenInside: [StaticString]

    /// The highest rank the check can hold (ranks need not be dense: leave
    /// room between them for the classes to come).
    static let maxRank = 127

    /// An ordered class: taken only while holding no lock of this rank or
    /// a higher one, and no leaf (but those `takenInside` lists).
    package init(rank: Int, _ name: StaticString, takenInside: [StaticString] = []) {
        self.init(rank: min(max(rank, 1), Self.maxRank), isLeaf: false, name: name, takenInside: takenInside)
    }

    private init(rank: Int, isLeaf: Bool, name: StaticString, takenInside: [StaticString]) {
        self.rank = rank
        self.isLeaf = isLeaf
        self.name = name
        self.takenInside = takenInside
    }

    /// A leaf: takes nothing inside; taken inside any ordered lock, and
    /// inside the leaves `takenInside` names.
    package static func leaf(_ name: StaticString, takenInside: [StaticString] = []) -> LockClass {
        LockClass(rank: 0, isLeaf: true, name: name, takenInside: takenInside)
    }

    /// An `OperationGate`: a queue's or cache's turn, held while its host
    /// storage callbacks run (they may call the library, any handle's, so
    /// every lock nests inside it, another gate too): not checked.
    static let gate = LockClass(rank: 0, isLeaf: false, name: "OperationGate", takenInside: [])

    var isChecked: Bool { rank > 0 || isLeaf }

    /// Whether `takenInside` names the leaf `held`.
    func mayBeTaken(inside held: LockClass) -> Bool {
        takenInside.contains { strcmp($0.utf8Start, held.name.utf8Start) == 0 }
    }

    var text: String { name.description }
}

/// The lock order check. On in debug builds (swift test), and in any build
/// run with APPNORTH_LOCK_ORDER=1 in the environment: `make test` sets it
/// for the C tests, pytest and the fleet, so the release library they load
/// checks every acquisition. A violation writes both locks' names, and what
/// to change, to stderr and aborts. What a thread holds is one pthread
/// key's value; unchecked, an acquisition costs one load of the cell's flag.
enum LockOrder {
    // process-wide, not a ForkLocal: read once from the environment, which a child inherits.
    static let checked: Bool = {
        #if DEBUG
        return true
        #else
        guard let value = getenv("APPNORTH_LOCK_ORDER") else { return false }
        return value.pointee == UInt8(ascii: "1")
        #endif
    }()

    /// What one thread holds: the ordered ranks as bits (and their
    /// classes, for a message), the leaves in the order taken (innermost last).
    struct Held {
        var low: UInt64 = 0
        var high: UInt64 = 0
        var ordered: [LockClass] = []
        var leaves: [LockClass] = []

        init() {
            ordered.reserveCapacity(16)
            leaves.reserveCapacity(8)
        }

        /// The highest ordered rank held (0: none).
        var highestRank: Int {
            if high != 0 { return 127 - high.leadingZeroBitCount }
            return low == 0 ? 0 : 63 - low.leadingZeroBitCount
        }

        var ranks: [Int] { (1...LockClass.maxRank).filter { holds(rank: $0) } }

        func holds(rank: Int) -> Bool {
            rank < 64 ? low & (1 << UInt64(rank)) != 0 : high & (1 << UInt64(rank - 64)) != 0
        }

        mutating func set(rank: Int, _ on: Bool) {
            if rank < 64 {
                low = on ? low | 1 << UInt64(rank) : low & ~(1 << UInt64(rank))
            } else {
                high = on ? high | 1 << UInt64(rank - 64) : high & ~(1 << UInt64(rank - 64))
            }
        }

        mutating func add(_ lockClass: LockClass) {
            if lockClass.isLeaf { return leaves.append(lockClass) }
            set(rank: lockClass.rank, true)
            ordered.append(lockClass)
        }

        mutating func remove(_ lockClass: LockClass) {
            if !lockClass.isLeaf {
                if let at = ordered.lastIndex(where: { $0.rank == lockClass.rank }) { ordered.remove(at: at) }
                return set(rank: lockClass.rank, ordered.contains { $0.rank == lockClass.rank })
            }
            if let at = leaves.lastIndex(where: { strcmp($0.name.utf8Start, lockClass.name.utf8Start) == 0 }) {
                leaves.remove(at: at)
            }
        }

        /// The ordered lock of the highest rank held.
        var highest: LockClass? { ordered.max { $0.rank < $1.rank } }
    }

    /// The calling thread's `Held`, a box each thread makes on its first
    /// checked acquisition (freed when the thread exits).
    // process-wide, not a ForkLocal: a pthread key, valid in a child (a thread's value is its own).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { box in
            if let box { Unmanaged<HeldBox>.fromOpaque(box).release() }
        }
        return key
    }()

    private final class HeldBox { var held = Held() }

    private static var box: HeldBox {
        if let raw = pthread_getspecific(key) { return Unmanaged<HeldBox>.fromOpaque(raw).takeUnretainedValue() }
        let box = HeldBox()
        pthread_setspecific(key, Unmanaged.passRetained(box).toOpaque())
        return box
    }

    /// What the calling thread holds (for tests).
    static var held: Held { checked ? box.held : Held() }

    // Out of line, taking the cell: each `withLock` inlines only the test
    // of the cell's `checked` and a call (the class is not copied there).
    @inline(never)
    static func willAcquire(_ cell: UnsafeMutablePointer<LockCell>) {
        let lockClass = cell.pointee.lockClass
        let box = self.box
        if let message = violation(taking: lockClass, holding: box.held) {
            _ = message.withCString { write(2, $0, strlen($0)) }
            abort()
        }
        box.held.add(lockClass)
    }

    /// A try that got the lock: held from now on, not checked (a try
    /// never waits, so it cannot close a cycle).
    @inline(never)
    static func acquiredByTry(_ cell: UnsafeMutablePointer<LockCell>) { box.held.add(cell.pointee.lockClass) }

    @inline(never)
    static func released(_ cell: UnsafeMutablePointer<LockCell>) { box.held.remove(cell.pointee.lockClass) }

    /// nil when a thread holding `held` may take a lock of `lockClass`;
    /// else what a violation writes: both locks by name, and what to change.
    static func violation(taking lockClass: LockClass, holding held: Held) -> String? {
        let where_ = "docs/architecture.md, \"Lock classes\"\n"
        if let leaf = held.leaves.last {
            if lockClass.mayBeTaken(inside: leaf) { return nil }
            return "appnorth: lock order violated: taking \(lockClass.text) while holding the leaf \(leaf.text): "
                + "a leaf takes no lock inside. Release \(leaf.text) first, or, if \(lockClass.text) must be taken "
                + "inside it, add \"\(leaf.text)\" to takenInside: where \(lockClass.text)'s LockClass is declared "
                + "and run scripts/lock_classes.py --write; " + where_
        }
        guard !lockClass.isLeaf, held.highestRank >= lockClass.rank, let highest = held.highest else { return nil }
        return "appnorth: lock order violated: taking \(lockClass.text) (rank \(lockClass.rank)) while holding "
            + "\(highest.text) (rank \(highest.rank)): a thread takes only locks of a higher rank than those it holds, or leaves. "
            + "Take it outside the other, or give the inner lock's LockClass a higher rank "
            + "(scripts/lock_classes.py --write lists them); " + where_
    }
}
