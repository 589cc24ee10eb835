import XCTest
import Glibc
@testable import AppNorthCore

/// The accounting of rows a trim deletes while they are leased to an
/// upload attempt (`BatchLease`), on the stores themselves, with numbers:
/// every tracked event ends queued, delivered or counted dropped, once,
/// and the count never goes below zero. No server needed.
final class LeaseAccountingTests: XCTestCase {
    var folder = ""
    static let firstMs: Int64 = 1_700_000_000_000
    override func setUp() { folder = "/tmp/appnorth-lease-\(getpid())-\(Random.hexToken(bytes: 4))" }
    override func tearDown() { _ = system("rm -rf '\(folder)'") }

    func openStore() throws -> EventStore {
        let directory = try DataDirectory(path: folder)
        return try EventStore(db: try SQLiteStore(directory: directory), directory: directory, epoch: 0)
    }

    /// Journals and imports events `e<i>` (ids at `firstMs + i` ms).
    func queue(_ store: EventStore, _ indexes: some Sequence<Int>) throws {
        try store.journalForTests(indexes, firstMs: Self.firstMs)
        try store.drain()
    }

    func dropped(_ store: EventStore) -> Int { store.limits.dropped.count }

    /// The bug of issue 24's note, as it happened: a batch of 20 in its
    /// attempt, a trim deletes its 10 oldest, the server answers 413 and
    /// the halves go. The first half is all gone; before, each half's lease
    /// took the trim's 10 back as "delivered" (the 413 had delivered
    /// nothing): -10. Now the 413 is the attempt's verdict: 10 dropped.
    func testATrimDuringAnAttemptThatGets413CountsItsRowsOnce() throws {
        let store = try openStore()
        try queue(store, 0..<30)
        let batch = try store.oldest(20)
        XCTAssertEqual(try store.lease(batch, from: nil).count, 20)
        XCTAssertEqual(try store.drain(trimmingTo: (20, 1 << 30)), 0, "all 10 are leased: not the trim's to count")
        XCTAssertEqual(dropped(store), 0, "their verdict waits for the attempt")
        store.endAttempt(delivered: false)  // 413
        XCTAssertEqual(dropped(store), 10)
        XCTAssertEqual(try store.lease(Array(batch[..<10]), from: nil).count, 0, "the first half is gone")
        let second = try store.lease(Array(batch[10...]), from: nil)
        XCTAssertEqual(second.count, 10)
        store.endAttempt(delivered: true)
        try store.remove(second)
        store.releaseLease()
        XCTAssertEqual(dropped(store), 10)
        XCTAssertEqual(store.count, 10)
        XCTAssertEqual(10 + 10 + dropped(store), 30, "delivered + queued + dropped = tracked")
    }

    /// A delivered attempt: the rows a trim deleted under it were
    /// delivered, counted by nobody as dropped.
    func testRowsTrimmedDuringADeliveredAttemptAreNotDropped() throws {
        let store = try openStore()
        try queue(store, 0..<30)
        let batch = try store.lease(try store.oldest(20), from: nil)
        try store.drain(trimmingTo: (25, 1 << 30))
        store.endAttempt(delivered: true)
        try store.remove(batch)
        store.releaseLease()
        XCTAssertEqual(dropped(store), 0)
        XCTAssertEqual(store.count, 10)
    }

    /// A failed attempt, then its retry: the rows trimmed during the
    /// attempt are dropped once; the retry sends the rest; rows trimmed
    /// while it waits unleased are the trim's own drops.
    func testAFailedAttemptThenARetryCountEveryRowOnce() throws {
        let store = try openStore()
        try queue(store, 0..<30)
        let batch = try store.oldest(20)
        _ = try store.lease(batch, from: nil)
        try store.drain(trimmingTo: (27, 1 << 30))        // 3 under the attempt
        store.endAttempt(delivered: false)
        XCTAssertEqual(dropped(store), 3)
        XCTAssertEqual(try store.drain(trimmingTo: (25, 1 << 30)), 2, "unleased while it waits: the trim's own")
        XCTAssertEqual(dropped(store), 5)
        let retry = try store.lease(batch, from: nil)
        XCTAssertEqual(retry.count, 15)
        try store.drain(trimmingTo: (20, 1 << 30))        // 5 more under the retry, which is delivered
        store.endAttempt(delivered: true)
        try store.remove(retry)
        store.releaseLease()
        XCTAssertEqual(dropped(store), 5)
        XCTAssertEqual(store.count, 10)
        XCTAssertEqual(15 + 10 + dropped(store), 30)
    }

    /// A delivered batch not deleted yet (the next one in flight) is
    /// leased below the attempt: a trim deletes it without counting it.
    func testADeliveredBatchNotDeletedYetIsNeverCountedDropped() throws {
        let store = try openStore()
        try queue(store, 0..<40)
        let first = try store.lease(try store.oldest(20), from: nil)
        store.endAttempt(delivered: true)
        let second = try store.lease(try store.oldest(20, after: first.last?.seq), from: first.first?.seq)
        try store.drain(trimmingTo: (15, 1 << 30))        // all 20 delivered, then 5 of the attempt
        XCTAssertEqual(dropped(store), 0)
        store.endAttempt(delivered: false)
        XCTAssertEqual(dropped(store), 5, "only the attempt's rows were dropped")
        try store.remove(first)
        store.releaseLease()
        XCTAssertEqual(store.count, 15)
        XCTAssertEqual(second.count, 20)
        XCTAssertEqual(20 + 15 + dropped(store), 40)
    }

    /// A delivery is settled by the next lease (or the release), not in a
    /// transaction of its own: a trim in between finds the delivered rows
    /// still in the attempt and counts them as owed, which that
    /// settlement, as delivered, then owes nobody.
    func testADeliveryIsSettledByTheNextLeaseAndTrimmedRowsStayDelivered() throws {
        let store = try openStore()
        try queue(store, 0..<40)
        let first = try store.lease(try store.oldest(20), from: nil)
        store.endAttempt(delivered: true)
        XCTAssertTrue(store.limits.deliveredUnsettled.load(ordering: .relaxed))
        try store.drain(trimmingTo: (30, 1 << 30))        // 10 of the delivered batch
        let second = try store.lease(try store.oldest(20, after: first.last?.seq), from: first.first?.seq)
        XCTAssertFalse(store.limits.deliveredUnsettled.load(ordering: .relaxed), "the lease settled it")
        XCTAssertEqual(second.count, 20)
        store.endAttempt(delivered: false)
        XCTAssertEqual(dropped(store), 0, "the trimmed rows were delivered")
        try store.remove(first)
        store.releaseLease()
        XCTAssertEqual(store.count, 20)
        XCTAssertEqual(20 + 20 + dropped(store), 40)
    }

    /// The release settles a delivery not settled yet, as delivered.
    func testTheReleaseSettlesAnUnsettledDeliveryAsDelivered() throws {
        let store = try openStore()
        try queue(store, 0..<30)
        let batch = try store.lease(try store.oldest(20), from: nil)
        store.endAttempt(delivered: true)
        try store.drain(trimmingTo: (22, 1 << 30))        // 8 of the delivered batch
        store.releaseLease()
        XCTAssertEqual(dropped(store), 0)
        XCTAssertFalse(store.limits.deliveredUnsettled.load(ordering: .relaxed))
        try store.remove(batch)
        XCTAssertEqual(store.count, 10)
    }

    /// Two handles: B's trim deletes rows of A's attempt; A counts them
    /// when its attempt fails, B never does.
    func testAnotherHandlesTrimLeavesTheVerdictToTheOwner() throws {
        let a = try openStore(), b = try openStore()
        try queue(a, 0..<30)
        _ = try a.lease(try a.oldest(20), from: nil)
        XCTAssertEqual(try b.drain(trimmingTo: (24, 1 << 30)), 0)
        XCTAssertEqual(dropped(b), 0)
        a.endAttempt(delivered: false)
        XCTAssertEqual(dropped(a), 6)
        XCTAssertEqual(try b.drain(trimmingTo: (20, 1 << 30)), 4, "unleased now: B's own")
        a.releaseLease()
        XCTAssertEqual(dropped(a) + dropped(b), 10)
        XCTAssertEqual(a.directoryQueued.count, 20)
    }

    /// A lease that was never ended (a crash of the thread's logic, a
    /// database error) ends as failed at the next lease, once.
    func testAnAttemptNotEndedCountsAsFailedOnce() throws {
        let store = try openStore()
        try queue(store, 0..<30)
        let batch = try store.oldest(20)
        _ = try store.lease(batch, from: nil)
        try store.drain(trimmingTo: (26, 1 << 30))
        _ = try store.lease(batch, from: nil)
        _ = try store.lease(batch, from: nil)
        store.releaseLease()
        XCTAssertEqual(dropped(store), 4)
    }

    /// The stored form: what an older library wrote (no `from`) is all in
    /// its attempt; damage is ignored; owed never reads negative.
    func testTheStoredLeaseIsParsedDefensively() {
        XCTAssertEqual(BatchLease(parsing: "3:20"), BatchLease(low: 3, high: 20, from: 3, owed: 0))
        XCTAssertEqual(BatchLease(parsing: "3:20:9:9"), BatchLease(low: 3, high: 20, from: 3, owed: 9))
        XCTAssertEqual(BatchLease(parsing: "3:20:-9:0:5")?.owed, 0)
        XCTAssertEqual(BatchLease(parsing: "3:20:1:0:99")?.from, 21)
        XCTAssertNil(BatchLease(parsing: "20:3"))
        XCTAssertNil(BatchLease(parsing: "x:3"))
        let lease = BatchLease(low: 1, high: 40, from: 21, owed: 2)
        XCTAssertEqual(BatchLease(parsing: lease.value), lease)
        XCTAssertEqual(lease.ended(delivered: false).dropped, 2)
        XCTAssertEqual(lease.ended(delivered: false).rest, BatchLease(low: 1, high: 20, from: 21, owed: 0))
        XCTAssertEqual(lease.ended(delivered: true).dropped, 0)
        XCTAssertEqual(lease.ended(delivered: true).rest, BatchLease(low: 1, high: 40, from: 41, owed: 0))
    }
}
