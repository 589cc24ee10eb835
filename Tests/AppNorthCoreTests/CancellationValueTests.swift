import XCTest
@testable import AppNorthCore

/// Cancellation: a pure value over a token and a generation. No threads, no
/// server (nothing is attached, so a cancel wakes no one).
final class CancellationValueTests: XCTestCase {
    func testNothingCancelledIsNotCancelled() {
        let scope = Cancellation(operation: CancellationToken(), client: InFlightTransfers())
        XCTAssertNil(scope.reason)
        XCTAssertFalse(scope.isCancelled)
        XCTAssertNil(Cancellation().reason, "no operation and no client: never cancelled")
    }

    func testItsOperationsCancel() {
        let operation = CancellationToken()
        let scope = Cancellation(operation: operation, client: InFlightTransfers())
        operation.cancel()
        XCTAssertEqual(scope.reason, .operation)
        XCTAssertTrue(scope.isCancelled)
    }

    func testAClientCancelAfterTheCapture() {
        let client = InFlightTransfers()
        let scope = Cancellation(operation: nil, client: client)
        client.cancelAll()
        XCTAssertEqual(scope.reason, .client)
        client.cancelAll()
        XCTAssertEqual(scope.reason, .client, "a second one changes nothing")
    }

    func testAClientCancelBeforeTheCaptureDoesNotCount() {
        let client = InFlightTransfers()
        client.cancelAll()
        let scope = Cancellation(operation: CancellationToken(), client: client)
        XCTAssertNil(scope.reason, "work that starts after a client cancel runs")
        client.cancelAll()
        XCTAssertEqual(scope.reason, .client, "the next one counts")
    }

    /// Both: the operation's cancel wins, whichever came first.
    func testBothTheOperationWins() {
        let operation = CancellationToken(), client = InFlightTransfers()
        let scope = Cancellation(operation: operation, client: client)
        client.cancelAll()
        operation.cancel()
        XCTAssertEqual(scope.reason, .operation)
    }

    /// The value is copied, not shared: each copy keeps the generation it
    /// was made with, and reads the same token and client.
    func testCopiesKeepTheirCapture() {
        let operation = CancellationToken(), client = InFlightTransfers()
        let before = Cancellation(operation: operation, client: client)
        let copy = before
        client.cancelAll()
        let after = Cancellation(operation: operation, client: client)
        XCTAssertEqual(copy.reason, .client)
        XCTAssertNil(after.reason)
        operation.cancel()
        XCTAssertEqual(after.reason, .operation)
    }

    func testAnEngineWaitEndsAsItsCancellationSays() {
        let operation = CancellationToken(), client = InFlightTransfers()
        let wait = EngineWait(timeoutMilliseconds: 60_000,
                              cancellation: Cancellation(operation: operation, client: client)) { _ in }
        XCTAssertNil(wait.cancelled)
        client.cancelAll()
        XCTAssertEqual(wait.cancelled, .cancelled(.client))
        operation.cancel()
        XCTAssertEqual(wait.cancelled, .cancelled(.operation))
    }
}
