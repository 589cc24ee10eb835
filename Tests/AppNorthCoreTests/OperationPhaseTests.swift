import XCTest
@testable import AppNorthCore

/// `OperationPhase`, the non-blocking operation's life as a value: every
/// (phase, event) pair against the table in its comment.
final class OperationPhaseTests: XCTestCase {
    func testEveryTransition() {
        typealias P = OperationPhase
        let expected: [P: [P.Event: P]] = [
            .started: [.launched: .running, .cancelRequested: .cancelled, .completionBegins: .completing,
                       .completionDelivered: .completed],
            .running: [.cancelRequested: .cancelled, .completionBegins: .completing, .completionDelivered: .completed],
            .cancelled: [.cancelRequested: .cancelled, .completionBegins: .completing, .completionDelivered: .completed],
            .completing: [.completionDelivered: .completed],
            .completed: [:],
        ]
        for phase in P.allCases {
            for event in P.Event.allCases {
                XCTAssertEqual(phase.after(event), expected[phase]?[event], "\(phase) after \(event)")
            }
        }
    }

    func testCancellableUntilTheCompletionBegins() {
        XCTAssertEqual(OperationPhase.allCases.filter(\.isCancellable), [.started, .running, .cancelled])
        XCTAssertEqual(OperationPhase.allCases.filter(\.isInFlight), [.started, .running, .cancelled, .completing])
    }

    /// The table moves an operation through its phases: a cancel finds it
    /// until its completion begins (a second cancel too), and it counts
    /// for its owner until it is delivered, once.
    func testTheTableAppliesThePhases() throws {
        let table = OperationTable()
        let owner = NSObjectLike()
        let op = try table.begin(owners: [owner])
        XCTAssertEqual(op.phase, .started)
        table.launched(op)
        XCTAssertEqual(op.phase, .running)
        XCTAssertTrue(table.cancel(id: op.id))
        XCTAssertTrue(table.cancel(id: op.id), "a second cancel of one in flight is accepted")
        XCTAssertEqual(op.phase, .cancelled)
        XCTAssertTrue(op.isCancelled)
        table.launched(op)
        XCTAssertEqual(op.phase, .cancelled, "a launch after a cancel stays cancelled")
        table.retire(op)
        XCTAssertEqual(op.phase, .completing)
        XCTAssertFalse(table.cancel(id: op.id), "its completion began")
        XCTAssertEqual(table.count(of: owner), 1)
        table.end(op)
        table.end(op)
        XCTAssertEqual(op.phase, .completed)
        XCTAssertEqual(table.count(of: owner), 0, "delivered once: counted down once")
    }
}

private final class NSObjectLike {}
