import XCTest
@testable import AppNorthCore

/// The per-batch upload as a value (`BatchUpload`): driven with plain
/// answers, no thread, clock, server or sleep.
final class BatchUploadTests: XCTestCase {
    let schedule = Backoff(retries: 3, baseMilliseconds: 1000, spread: 0.2)

    func events(_ range: Range<Int>) -> [StoredEvent] {
        range.map { StoredEvent(seq: Int64($0), id: "id\($0)", payload: []) }
    }

    func answer(_ sent: [StoredEvent], _ status: Int?, gzipped: Bool = true, rejected: Set<String>? = nil,
                jitter: Double = 0.5) -> BatchUpload.Input {
        let error: AppNorthError? = status.map { (200...299).contains($0) ? nil : .http("HTTP \($0)", httpStatus: $0) }
            ?? .network("refused")
        return .answered(sent: sent, status: status, error: error, gzipped: gzipped, rejected: rejected, jitter: jitter)
    }

    func testA2xxDeliversTheBatchAndFinishes() {
        let batch = events(0..<20)
        var upload = BatchUpload(batch, schedule: schedule)
        XCTAssertEqual(upload.next(.start), .attempt(batch, compressed: true, why: .first))
        XCTAssertEqual(upload.next(answer(batch, 202)), .deliver(batch, deferrable: true))
        XCTAssertEqual(upload.next(.done), .finish(.delivered))
    }

    func testRetriesFollowTheScheduleThenTheBatchIsKept() {
        let batch = events(0..<5)
        var upload = BatchUpload(batch, schedule: schedule)
        _ = upload.next(.start)
        // Jitter 0.5 is the nominal delay: 1 s, 2 s, 4 s.
        for (retry, delay) in [(1, 1000), (2, 2000), (3, 4000)] {
            XCTAssertEqual(upload.next(answer(batch, 503)), .wait(milliseconds: delay, retry: retry))
            XCTAssertEqual(upload.next(.waited(true)), .attempt(batch, compressed: true, why: .retry(retry)))
        }
        XCTAssertEqual(upload.next(answer(batch, nil)), .finish(.failed(.network("refused"), kept: true)))
    }

    func testTheJitterComesWithTheAnswer() {
        var upload = BatchUpload(events(0..<1), schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(events(0..<1), 429, jitter: 0)), .wait(milliseconds: 800, retry: 1))
        _ = upload.next(.waited(true))
        XCTAssertEqual(upload.next(answer(events(0..<1), 408, jitter: 1)), .wait(milliseconds: 2400, retry: 2))
    }

    func testAWaitCutShortAbandonsTheBatch() {
        var upload = BatchUpload(events(0..<3), schedule: schedule)
        _ = upload.next(.start)
        _ = upload.next(answer(events(0..<3), 500))
        XCTAssertEqual(upload.next(.waited(false)), .finish(.abandoned))
    }

    func testA415ToAGzipBodyGoesAgainUncompressedThenIsRefusedAsAny4xx() {
        let batch = events(0..<4)
        var upload = BatchUpload(batch, schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(batch, 415)), .attempt(batch, compressed: false, why: .uncompressed))
        XCTAssertEqual(upload.next(answer(batch, 415, gzipped: false)), .drop(batch, .refused))
        XCTAssertEqual(upload.next(.done), .finish(.failed(.http("HTTP 415", httpStatus: 415), kept: false)))
        XCTAssertFalse(upload.compress)
    }

    func testA413SplitsTheFirstHalfMustGoBeforeTheSecond() {
        let batch = events(0..<8)
        var upload = BatchUpload(batch, schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(batch, 413)), .attempt(events(0..<4), compressed: true, why: .half(of: 8, status: 413)))
        XCTAssertEqual(upload.next(answer(events(0..<4), 200)), .deliver(events(0..<4), deferrable: false))
        XCTAssertEqual(upload.next(.done), .attempt(events(4..<8), compressed: true, why: .secondHalf))
        XCTAssertEqual(upload.next(answer(events(4..<8), 200)), .deliver(events(4..<8), deferrable: false))
        XCTAssertEqual(upload.next(.done), .finish(.delivered))
    }

    func testA413HalfThatFailsStopsTheSplit() {
        var upload = BatchUpload(events(0..<8), schedule: schedule)
        _ = upload.next(.start)
        _ = upload.next(answer(events(0..<8), 413))
        XCTAssertEqual(upload.next(answer(events(0..<4), 403)), .drop(events(0..<4), .refused))
        XCTAssertEqual(upload.next(.done), .finish(.failed(.http("HTTP 403", httpStatus: 403), kept: false)),
                       "the second half is not sent")
    }

    func testA413ForOneEventDropsItAndCountsAsDelivered() {
        var upload = BatchUpload(events(0..<2), schedule: schedule)
        _ = upload.next(.start)
        _ = upload.next(answer(events(0..<2), 413))
        XCTAssertEqual(upload.next(answer(events(0..<1), 413)), .drop(events(0..<1), .tooLarge))
        XCTAssertEqual(upload.next(.done), .attempt(events(1..<2), compressed: true, why: .secondHalf))
        _ = upload.next(answer(events(1..<2), 200))
        XCTAssertEqual(upload.next(.done), .finish(.delivered))
    }

    /// A 400 that names no event: halves, down to the poisoned one.
    func testA400NamingNoEventIsBisectedDownToThePoisonedEvent() {
        let batch = events(0..<4)
        let poisoned = Set(["id2"])
        var upload = BatchUpload(batch, schedule: schedule)
        var action = upload.next(.start)
        var delivered: [Int64] = [], dropped: [Int64] = []
        for _ in 0..<20 {
            switch action {
            case .attempt(let rows, _, _):
                action = upload.next(answer(rows, rows.contains { poisoned.contains($0.id) } ? 400 : 200))
            case .deliver(let rows, _): delivered += rows.map(\.seq); action = upload.next(.done)
            case .drop(let rows, _): dropped += rows.map(\.seq); action = upload.next(.done)
            case .wait: XCTFail("no retry"); return
            case .finish(let outcome):
                XCTAssertEqual(outcome, .delivered, "some part went through")
                XCTAssertEqual(delivered, [0, 1, 3])
                XCTAssertEqual(dropped, [2])
                return
            }
        }
        XCTFail("did not finish")
    }

    func testABisectedBatchEveryPartOfWhichIsRefusedIsDiscarded() {
        var upload = BatchUpload(events(0..<2), schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(events(0..<2), 422)), .attempt(events(0..<1), compressed: true, why: .half(of: 2, status: 422)))
        XCTAssertEqual(upload.next(answer(events(0..<1), 422)), .drop(events(0..<1), .refused))
        XCTAssertEqual(upload.next(.done), .attempt(events(1..<2), compressed: true, why: .secondHalf), "a refused first half does not stop a bisection")
        _ = upload.next(answer(events(1..<2), 422))
        XCTAssertEqual(upload.next(.done), .finish(.failed(.http("HTTP 422", httpStatus: 422), kept: false)))
    }

    func testABisectedHalfThatStaysQueuedStopsTheBisection() {
        var upload = BatchUpload(events(0..<4), schedule: Backoff(retries: 0, baseMilliseconds: 1, spread: 0))
        _ = upload.next(.start)
        _ = upload.next(answer(events(0..<4), 400))
        XCTAssertEqual(upload.next(answer(events(0..<2), 503)), .finish(.failed(.http("HTTP 503", httpStatus: 503), kept: true)))
    }

    func testListedRejectedEventsAreDroppedAndTheRestGoesAtOnce() {
        let batch = events(0..<5)
        var upload = BatchUpload(batch, schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(batch, 400, rejected: ["id1", "id3", "other"])), .drop([batch[1], batch[3]], .rejected))
        XCTAssertEqual(upload.next(.done), .attempt([batch[0], batch[2], batch[4]], compressed: true, why: .rest))
        XCTAssertEqual(upload.next(answer([batch[0], batch[2], batch[4]], 200)), .deliver([batch[0], batch[2], batch[4]], deferrable: true))
    }

    func testEveryEventRejectedIsADiscardedBatch() {
        var upload = BatchUpload(events(0..<2), schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(events(0..<2), 422, rejected: ["id0", "id1"])), .drop(events(0..<2), .rejected))
        XCTAssertEqual(upload.next(.done), .finish(.failed(.http("HTTP 422", httpStatus: 422), kept: false)))
    }

    /// Rows that left the queue before an attempt (a trim) are not sent:
    /// the answer carries the rows the attempt had, which the machine
    /// continues with; a part whose rows all went counts as done.
    func testRowsThatLeftTheQueueAreNotSentAgain() {
        var upload = BatchUpload(events(0..<6), schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(answer(events(2..<6), 503)), .wait(milliseconds: 1000, retry: 1))
        XCTAssertEqual(upload.next(.waited(true)), .attempt(events(2..<6), compressed: true, why: .retry(1)))
        XCTAssertEqual(upload.next(.gone), .finish(.delivered))
    }

    func testAnAbandonedAttemptInsideASplitFinishesAtOnce() {
        var upload = BatchUpload(events(0..<4), schedule: schedule)
        _ = upload.next(.start)
        _ = upload.next(answer(events(0..<4), 413))
        XCTAssertEqual(upload.next(.abandoned), .finish(.abandoned))
        XCTAssertTrue(upload.frames.isEmpty)
    }

    func testAStorageFailureKeepsTheBatch() {
        var upload = BatchUpload(events(0..<4), schedule: schedule)
        _ = upload.next(.start)
        XCTAssertEqual(upload.next(.storageFailed(.storage("x"))), .finish(.failed(.storage("x"), kept: true)))
    }

    // MARK: - The budget of extra requests

    /// What one batch's upload came to, driven to its end by `status`
    /// (the answer to an attempt of these rows).
    struct Run {
        var requests = 0
        var delivered: [Int64] = []
        var dropped: [BatchUpload.DropReason: [Int64]] = [:]
        var outcome: BatchUpload.Outcome?
        var allDropped: [Int64] { dropped.values.flatMap { $0 }.sorted() }
    }

    func run(_ batch: [StoredEvent], _ status: ([StoredEvent]) -> Int) -> Run {
        var upload = BatchUpload(batch, schedule: schedule)
        var result = Run()
        var action = upload.next(.start)
        for _ in 0..<10_000 {
            switch action {
            case .attempt(let rows, _, _):
                result.requests += 1
                action = upload.next(answer(rows, status(rows)))
            case .deliver(let rows, _): result.delivered += rows.map(\.seq); action = upload.next(.done)
            case .drop(let rows, let reason): result.dropped[reason, default: []] += rows.map(\.seq); action = upload.next(.done)
            case .wait: action = upload.next(.waited(true))
            case .finish(let outcome): result.outcome = outcome; return result
            }
        }
        XCTFail("did not finish")
        return result
    }

    func testTheBudgetIsTwiceTheLevelsOfHalvesPlusTwo() {
        XCTAssertEqual([0, 1, 2, 3, 4, 5, 20, 100, 128, 129].map(BatchUpload.extraBudget), [2, 2, 4, 6, 6, 8, 12, 16, 16, 18])
    }

    /// Before the budget: 39 requests for a batch of 20 (2n - 1).
    func testA400ToEverythingCostsTheFirstRequestAndTheBudgetThenTheRestIsDiscarded() {
        let refused = run(events(0..<20)) { _ in 400 }
        XCTAssertEqual(refused.requests, 1 + 12)
        XCTAssertEqual(refused.allDropped, (0..<20).map(Int64.init), "every event dropped exactly once")
        XCTAssertFalse(refused.dropped[.overBudget, default: []].isEmpty)
        XCTAssertEqual(refused.outcome, .failed(.http("HTTP 400", httpStatus: 400), kept: false))
    }

    /// Before: 199 requests for a batch of 100, and the batch counted as
    /// delivered (no failed flush).
    func testA413ToEverythingIsBoundedAndAFailedBatch() {
        let refused = run(events(0..<100)) { _ in 413 }
        XCTAssertEqual(refused.requests, 1 + 16)
        XCTAssertEqual(refused.allDropped, (0..<100).map(Int64.init))
        XCTAssertFalse(refused.dropped[.tooLarge, default: []].isEmpty)
        XCTAssertEqual(refused.outcome, .failed(.http("HTTP 413", httpStatus: 413), kept: false),
                       "all refused: a failed flush for the breaker")
    }

    /// Every size up to 130, the poisoned event at every place: the budget
    /// always finds it; refused everything, the budget holds.
    func testTheBudgetFindsOnePoisonedEventAndHoldsAgainstARefusingServer() {
        for count in 1...130 {
            for status in [400, 413] {
                let refused = run(events(0..<count)) { _ in status }
                XCTAssertLessThanOrEqual(refused.requests, 1 + BatchUpload.extraBudget(count), "\(count), \(status)")
                XCTAssertEqual(refused.allDropped, (0..<count).map(Int64.init), "\(count), \(status)")
                XCTAssertEqual(refused.outcome, .failed(.http("HTTP \(status)", httpStatus: status), kept: false))
                for poisoned in Set([0, count / 3, count / 2, count - 1]) {
                    let found = run(events(0..<count)) { rows in rows.contains { $0.seq == poisoned } ? status : 200 }
                    XCTAssertEqual(found.allDropped, [Int64(poisoned)], "\(count), \(status), \(poisoned)")
                    XCTAssertEqual(found.delivered.count, count - 1)
                    XCTAssertEqual(found.outcome, count == 1 ? .failed(.http("HTTP \(status)", httpStatus: status), kept: false)
                                                             : .delivered)
                }
            }
        }
    }

    func testAPartlyDeliveredSplitStaysDelivered() {
        let mixed = run(events(0..<8)) { rows in rows.count > 2 ? 413 : 200 }
        XCTAssertEqual(mixed.delivered, (0..<8).map(Int64.init))
        XCTAssertEqual(mixed.outcome, .delivered)
    }
}
