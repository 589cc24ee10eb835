@testable import AppNorthCore
import XCTest

extension LockClass {
    /// `a test's lock`: lines a log sink collected, a test's condition
    /// (swift tests only).
    static let test = LockClass.leaf("a test's lock")
}

/// The lock order check of debug builds (docs/architecture.md, "Lock classes").
final class LockOrderTests: XCTestCase {
    func testWhatIsHeldIsTrackedPerThread() {
        #if DEBUG
        let drain = Lock(0, level: LockClass.drain)
        let connection = Lock(0, level: LockClass.connection)
        let counters = Lock(0, level: LockClass.eventCounters)
        drain.withLock { _ in
            XCTAssertEqual(LockOrder.held.ranks, [LockClass.drain.rank])
            connection.withLock { _ in
                XCTAssertEqual(LockOrder.held.ranks, [LockClass.drain.rank, LockClass.connection.rank])
                counters.withLock { _ in XCTAssertEqual(LockOrder.held.leaves.map(\.text), ["EventCounters.counts"]) }
                XCTAssertEqual(LockOrder.held.leaves.count, 0)
            }
        }
        XCTAssertEqual(LockOrder.held.ranks, [], "released, nothing left held")
        XCTAssertTrue(LockOrder.checked, "debug builds check")
        #endif
    }

    /// An ordered lock inside one of a higher or the same rank is refused,
    /// naming both locks and saying what to change (the message, as a
    /// value: the abort itself would end the test process).
    func testAnOrderedLockInsideALaterOneIsRefused() {
        XCTAssertNil(LockOrder.violation(taking: .connection, holding: held(.drain)))
        XCTAssertNil(LockOrder.violation(taking: .eventCounters, holding: held(.drain, .connection)), "a leaf inside any ordered lock")
        let message = LockOrder.violation(taking: .drain, holding: held(.stripe, .connection))
        XCTAssertTrue(message?.hasPrefix("appnorth: lock order violated: taking EventImporter.state (rank 10) while holding "
                                         + "SQLiteStore.connection (rank 45)") == true, message ?? "nil")
        XCTAssertNotNil(LockOrder.violation(taking: .drain, holding: held(.drain)), "the same rank twice")
    }

    /// Anything taken while a leaf is held is refused, a leaf too, unless
    /// the lock taken lists that leaf in `takenInside`.
    func testNothingIsTakenInsideALeafButAListedPair() {
        let message = LockOrder.violation(taking: .eventSender, holding: held(.eventCounters))
        XCTAssertTrue(message?.contains("taking EventSender.current while holding the leaf EventCounters.counts") == true,
                      message ?? "nil")
        XCTAssertTrue(message?.contains("add \"EventCounters.counts\" to takenInside:") == true, message ?? "nil")
        XCTAssertNotNil(LockOrder.violation(taking: .connection, holding: held(.eventCounters)), "an ordered lock inside a leaf")
        let inner = LockClass.leaf("Inner.lock", takenInside: ["EventCounters.counts"])
        XCTAssertNil(LockOrder.violation(taking: inner, holding: held(.eventCounters)), "a listed pair")
        XCTAssertNotNil(LockOrder.violation(taking: inner, holding: held(.eventSender)), "listed for another leaf only")
    }

    private func held(_ classes: LockClass...) -> LockOrder.Held {
        var held = LockOrder.Held()
        for lockClass in classes { held.add(lockClass) }
        return held
    }
}
