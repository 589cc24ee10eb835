import XCTest
@testable import AppNorthCore

/// The event queue's counters (`EventCounters`): no server, no queue.
final class EventCountersTests: XCTestCase {
    func testDropsAreCountedByReasonAndTheStoresAreAddedIn() {
        let counters = EventCounters()
        counters.drop(3, .clientError)
        counters.drop(0, .consent)
        counters.drop(2, .consent)
        counters.deliver(5)
        let counts = counters.snapshot(adding: [.consent: 1, .queueLimit: 7])
        XCTAssertEqual(EventCounters.DropReason.allCases.map(counts.dropped), [7, 3, 0, 3, 0, 0, 0, 0, 0])
        XCTAssertEqual(counts.delivered, 5)
        XCTAssertEqual(counters.snapshot().dropped(.consent), 2, "adding does not change what is held")
    }

    /// The stats' keys, in the order the stats have always listed them.
    func testTheReasonsAreTheStatsKeys() {
        XCTAssertEqual(EventCounters.DropReason.allCases.map(\.key),
                       ["queue_limit", "client_error", "payload_too_large", "consent", "damaged",
                        "sampled", "blocked", "disabled", "filtered"])
        XCTAssertEqual(BatchUpload.DropReason.tooLarge.counted, .payloadTooLarge)
        XCTAssertEqual([BatchUpload.DropReason.rejected, .refused, .overBudget].map(\.counted),
                       [.clientError, .clientError, .clientError])
    }

    func testCountsFromManyThreadsAddUp() {
        let counters = EventCounters()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<1000 {
                counters.drop(1, .damaged)
                counters.deliver(2)
            }
        }
        XCTAssertEqual(counters.snapshot().dropped(.damaged), 8000)
        XCTAssertEqual(counters.delivered, 16000)
    }
}
