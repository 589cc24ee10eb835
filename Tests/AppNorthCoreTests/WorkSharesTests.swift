import XCTest
@testable import AppNorthCore

/// WorkShares and WorkTurn: pure values, no threads.
final class WorkSharesTests: XCTestCase {
    func testAShareAtItsLimitLetsOtherSharesPast() {
        var shares = WorkShares<Int, String>(perShare: 2)
        for name in ["a1", "a2", "a3", "a4"] { shares.add(name, share: 1) }
        shares.add("b1", share: 2)
        XCTAssertEqual(shares.runnableCount, 3)  // a1, a2 and b1
        XCTAssertEqual(shares.take()?.job, "a1")
        XCTAssertEqual(shares.take()?.job, "a2")
        // Share 1 runs 2: b1 goes past a3 and a4.
        XCTAssertEqual(shares.take()?.job, "b1")
        XCTAssertNil(shares.take())
        XCTAssertEqual(shares.running(1), 2)
        XCTAssertEqual(shares.waitingCount, 2)
        shares.finished(1)
        XCTAssertEqual(shares.runnableCount, 1)
        XCTAssertEqual(shares.take()?.job, "a3")
        shares.finished(2)
        XCTAssertEqual(shares.running(2), 0)
        XCTAssertNil(shares.take())
    }

    func testOldestRunnableJobFirstAcrossShares() {
        var shares = WorkShares<Int, Int>(perShare: 1)
        shares.add(10, share: 1)
        shares.add(20, share: 2)
        shares.add(11, share: 1)
        shares.add(30, share: 3)
        XCTAssertEqual(shares.take()?.job, 10)
        XCTAssertEqual(shares.take()?.job, 20)
        XCTAssertEqual(shares.take()?.job, 30)
        shares.finished(1)
        XCTAssertEqual(shares.take()?.job, 11)
    }

    func testJobsWithoutAShareHaveNoLimit() {
        var shares = WorkShares<Int, Int>(perShare: 1)
        for job in 0..<5 { shares.add(job, share: nil) }
        XCTAssertEqual(shares.runnableCount, 5)
        XCTAssertEqual((0..<5).compactMap { _ in shares.take()?.job }, [0, 1, 2, 3, 4])
        XCTAssertEqual(shares.running(nil), 5)
    }

    func testRemoveNewestTakesBackTheLastJobOfItsShare() {
        var shares = WorkShares<Int, Int>(perShare: 2)
        shares.add(1, share: 7)
        shares.add(2, share: 7)
        shares.removeNewest(share: 7)
        XCTAssertEqual(shares.waitingCount, 1)
        XCTAssertEqual(shares.take()?.job, 1)
        XCTAssertNil(shares.take())
        shares.removeNewest(share: 9)  // none: nothing changes
        XCTAssertEqual(shares.waitingCount, 0)
    }

    func testPerShareIsAtLeastOne() {
        XCTAssertEqual(WorkShares<Int, Int>(perShare: 0).perShare, 1)
    }

    func testWorkTurnHasOneWinner() {
        XCTAssertEqual(WorkTurn.waiting.after(.workerTakes), .running)
        XCTAssertEqual(WorkTurn.waiting.after(.ended), .ended)
        for turn in [WorkTurn.running, .ended] {
            for event in WorkTurn.Event.allCases { XCTAssertNil(turn.after(event), "\(turn) \(event)") }
        }
        let cell = WorkTurnCell()
        XCTAssertTrue(cell.apply(.ended))
        XCTAssertFalse(cell.apply(.workerTakes))
        XCTAssertEqual(cell.turn, .ended)
        let other = WorkTurnCell()
        XCTAssertTrue(other.apply(.workerTakes))
        XCTAssertFalse(other.apply(.ended))
        XCTAssertEqual(other.turn, .running)
    }

    /// What the pool's worker loop relies on: `take` hands out a job
    /// exactly when `runnableCount` says one may run (a job counted but
    /// never handed out made a worker spin under the pool's lock: the nil
    /// share, 7f32855). Random adds, takes and finishes, shares nil and 1-3.
    func testTakeAgreesWithRunnableCountWhateverHappens() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var shares = WorkShares<Int, Int>(perShare: 2)
            var running: [Int?] = []
            for step in 0..<60 {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: shares.add(step, share: [nil, 1, 2, 3].randomElement(using: &generator)!)
                case 1 where !running.isEmpty:
                    shares.finished(running.remove(at: Int.random(in: 0..<running.count, using: &generator)))
                default:
                    let runnable = shares.runnableCount
                    let taken = shares.take()
                    XCTAssertEqual(taken != nil, runnable > 0, "step \(step): runnable \(runnable)")
                    if let taken { running.append(taken.share) }
                }
            }
        }
    }
}
