import XCTest
@testable import AppNorthCore

extension Array: CycleBatch {}

/// One upload cycle (`UploadCycle`) through a port of the test's own: a
/// queue of numbered batches and scripted outcomes, no store, thread,
/// clock or server. What the cycle owns is checked: how far it goes, what
/// it records, and how it ends for `UploadTrigger`.
final class UploadCycleTests: XCTestCase {
    struct Port: CyclePort {
        var gates: [CycleGate] = []
        var batches: [[Int]]
        var outcomes: [BatchUpload.Outcome] = []
        var readError: AppNorthError?
        var moreToImport = false
        var stopAfter = Int.max
        var uploaded: [[Int]] = []
        var storageFailures = 0
        var failedFlushes: [AppNorthError] = []
        var abandons = 0

        var isStopping: Bool { uploaded.count >= stopAfter }

        mutating func gate() -> CycleGate {
            gates.isEmpty ? .go(batchSize: 2, generation: 7) : gates.removeFirst()
        }

        mutating func nextBatch(_ batchSize: Int, _ generation: UInt64) throws(AppNorthError) -> [Int] {
            XCTAssertEqual(batchSize, 2)
            XCTAssertEqual(generation, 7)
            if let readError { throw readError }
            if batches.isEmpty { moreToImport = false; return [] }
            return batches.removeFirst()
        }

        mutating func upload(_ batch: [Int], _ batchSize: Int, _ generation: UInt64) -> BatchUpload.Outcome {
            uploaded.append(batch)
            return outcomes.isEmpty ? .delivered : outcomes.removeFirst()
        }

        mutating func storageFailed(_ error: AppNorthError) { storageFailures += 1 }
        mutating func failedFlush(_ error: AppNorthError) { failedFlushes.append(error) }
        mutating func abandoned() { abandons += 1 }
    }

    func testBatchesGoUntilTheQueueIsEmpty() {
        var port = Port(batches: [[1, 2], [3, 4], [5]])
        XCTAssertEqual(UploadCycle.run(&port), .succeeded)
        XCTAssertEqual(port.uploaded, [[1, 2], [3, 4], [5]])
        XCTAssertTrue(port.failedFlushes.isEmpty)
    }

    func testAnEmptyReadWithMoreToImportReadsAgain() {
        var port = Port(batches: [[], [1]], moreToImport: true)
        XCTAssertEqual(UploadCycle.run(&port), .succeeded)
        XCTAssertEqual(port.uploaded, [[1]], "a part of ids already queued does not end the cycle")
    }

    func testAFailedBatchEndsTheCycleAsOneFailedFlush() {
        let error = AppNorthError.network("down")
        var port = Port(batches: [[1, 2], [3, 4], [5]], outcomes: [.delivered, .failed(error, kept: true)])
        XCTAssertEqual(UploadCycle.run(&port), .kept)
        XCTAssertEqual(port.uploaded, [[1, 2], [3, 4]], "nothing after the failed batch")
        XCTAssertEqual(port.failedFlushes, [error])

        var refused = Port(batches: [[1, 2]], outcomes: [.failed(.http("HTTP 400", httpStatus: 400), kept: false)])
        XCTAssertEqual(UploadCycle.run(&refused), .discarded)
        XCTAssertEqual(refused.failedFlushes.count, 1)
    }

    func testAnUnreadableQueueKeepsTheBatchWithoutAFailedFlush() {
        var port = Port(batches: [[1]], readError: .storage("disk"))
        XCTAssertEqual(UploadCycle.run(&port), .kept)
        XCTAssertEqual(port.storageFailures, 1)
        XCTAssertTrue(port.failedFlushes.isEmpty, "a storage failure is not the server's: the breaker is not told")
        XCTAssertTrue(port.uploaded.isEmpty)
    }

    func testTheGateEndsTheCycle() {
        var paused = Port(gates: [.paused], batches: [[1]])
        XCTAssertEqual(UploadCycle.run(&paused), .paused)
        var revoked = Port(gates: [.go(batchSize: 2, generation: 7), .notAllowed], batches: [[1, 2], [3]])
        XCTAssertEqual(UploadCycle.run(&revoked), .succeeded)
        XCTAssertEqual(revoked.uploaded, [[1, 2]], "consent is checked before every batch")
        XCTAssertTrue(paused.uploaded.isEmpty)
    }

    func testAnAbandonedBatchEndsTheCycleAndAdoptsTheChange() {
        var port = Port(batches: [[1, 2], [3]], outcomes: [.abandoned])
        XCTAssertEqual(UploadCycle.run(&port), .succeeded)
        XCTAssertEqual(port.abandons, 1)
        XCTAssertEqual(port.uploaded, [[1, 2]])
    }

    func testAStopEndsTheCycle() {
        var port = Port(batches: [[1, 2], [3, 4], [5]], stopAfter: 1)
        XCTAssertEqual(UploadCycle.run(&port), .succeeded)
        XCTAssertEqual(port.uploaded, [[1, 2]])
    }
}
