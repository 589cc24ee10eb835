import XCTest
@testable import AppNorthCore

/// The uploader's driver for one batch (`BatchDriver`) through a port of
/// the test's own: an in-memory queue and scripted answers, no server,
/// thread or clock. What the driver owns is checked: the rows removed,
/// drops counted by reason, deliveries counted, the breaker told, the log.
final class BatchDriverTests: XCTestCase {
    /// A queue in memory whose server answers `status(rows)`.
    struct Port: BatchPort {
        var queued: Set<Int64>
        var status: ([StoredEvent]) -> Int
        var attempts: [[Int64]] = []
        var pauses: [Int] = []
        var deferred: [[Int64]] = []
        var successes = 0
        var failuresBefore = 0

        mutating func attempt(_ events: [StoredEvent], compressed: Bool) -> BatchUpload.Input {
            let sent = events.filter { queued.contains($0.seq) }
            if sent.isEmpty { return .gone }
            attempts.append(sent.map(\.seq))
            let code = status(sent)
            let error: AppNorthError? = (200...299).contains(code) ? nil : .http("HTTP \(code)", httpStatus: code)
            return .answered(sent: sent, status: code, error: error, gzipped: compressed, rejected: nil, jitter: 0.5)
        }

        mutating func pause(milliseconds: Int) -> Bool {
            pauses.append(milliseconds)
            return true
        }

        mutating func removeDelivered(_ events: [StoredEvent], deferrable: Bool) {
            if deferrable { deferred.append(events.map(\.seq)) }
            for event in events { queued.remove(event.seq) }
        }

        mutating func removeRefused(_ events: [StoredEvent], byID: Bool) -> Int {
            events.filter { queued.remove($0.seq) != nil }.count
        }

        mutating func recordSuccess() -> Int {
            successes += 1
            defer { failuresBefore = 0 }
            return failuresBefore
        }
    }

    let schedule = Backoff(retries: 3, baseMilliseconds: 1000, spread: 0.2)
    let counters = EventCounters()
    /// The log lines, kept by a class (a `Lock` cannot be copied into a closure).
    final class Lines: Sendable {
        let lock = Lock<[String]>([], level: LockLevel.test)
        func append(_ line: String) { lock.withLock { $0.append(line) } }
        var all: [String] { lock.withLock { $0 } }
    }
    let lines = Lines()

    func events(_ count: Int) -> [StoredEvent] {
        (0..<count).map { StoredEvent(seq: Int64($0), id: "id\($0)", payload: []) }
    }

    func driver() -> BatchDriver {
        BatchDriver(counters: counters, logger: Logger(minimum: .info) { [lines] _, line in lines.append(line) })
    }

    func testARefusingServerCostsTheBudgetAndEveryEventIsCountedOnce() {
        var port = Port(queued: Set(0..<20), status: { _ in 400 })
        let outcome = driver().run(events(20), schedule: schedule, port: &port)
        XCTAssertEqual(outcome, .failed(.http("HTTP 400", httpStatus: 400), kept: false))
        XCTAssertEqual(port.attempts.count, 13, "the first request and 12 extra")
        XCTAssertTrue(port.queued.isEmpty)
        XCTAssertEqual(counters.snapshot().dropped(.clientError), 20)
        XCTAssertEqual(counters.delivered, 0)
        XCTAssertEqual(port.successes, 0, "no delivery: the breaker is not reset")
        XCTAssertEqual(lines.all.filter { $0.contains("kept refusing") }.count, 1)
    }

    func testAPoisonedEventIsDroppedAloneAndTheRestDelivered() {
        var port = Port(queued: Set(0..<20), status: { rows in rows.contains { $0.seq == 11 } ? 400 : 200 })
        port.failuresBefore = 2
        let outcome = driver().run(events(20), schedule: schedule, port: &port)
        XCTAssertEqual(outcome, .delivered)
        XCTAssertTrue(port.queued.isEmpty)
        XCTAssertEqual(counters.snapshot().dropped(.clientError), 1)
        XCTAssertEqual(counters.delivered, 19)
        XCTAssertTrue(port.deferred.isEmpty, "halves are removed at once, only a whole batch is deferred")
        XCTAssertTrue(lines.all.contains("events: uploads work again after 2 failure(s)"))
    }

    func testAWholeBatchIsDeliveredDeferredAfterARetry() {
        var answers = [503, 202]
        var port = Port(queued: Set(0..<5), status: { _ in answers.removeFirst() })
        let outcome = driver().run(events(5), schedule: schedule, port: &port)
        XCTAssertEqual(outcome, .delivered)
        XCTAssertEqual(port.pauses, [1000])
        XCTAssertEqual(port.deferred, [[0, 1, 2, 3, 4]])
        XCTAssertEqual(counters.delivered, 5)
    }

    /// Rows a trim took while the batch waited are neither sent nor counted
    /// as dropped by the batch.
    func testRowsThatLeftTheQueueAreNotCountedTwice() {
        var port = Port(queued: Set(0..<4), status: { _ in 413 })
        port.queued.remove(3)
        let outcome = driver().run(events(4), schedule: schedule, port: &port)
        XCTAssertEqual(outcome, .failed(.http("HTTP 413", httpStatus: 413), kept: false))
        XCTAssertEqual(counters.snapshot().dropped(.payloadTooLarge) + counters.snapshot().dropped(.clientError), 3)
        XCTAssertFalse(port.attempts.contains { $0.contains(3) })
    }
}
