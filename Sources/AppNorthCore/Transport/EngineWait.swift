/// A wait that holds no thread (the non-blocking events flush waiting for
/// its upload cycle): the transfer engine's thread watches its deadline and
/// its cancellation, and whoever sees the awaited thing happen calls
/// `TransferEngine.reach`. It ends exactly once, on the engine thread, with
/// no lock held: `onEnd` gets how.
///
/// A cancel of its operation (`CancellationToken`) or of its client
/// (`cancelInFlight()`, through the transport's `InFlightTransfers`) wakes
/// the engine, which ends the wait within a sweep (a few milliseconds).
package final class EngineWait: Sendable {
    package enum End: Sendable, Equatable { case reached, timedOut, cancelledByOperation, cancelledByClient }

    let deadline: Deadline
    let operation: CancellationToken
    let inFlight: InFlightTransfers
    private let generation: UInt64
    let onEnd: @Sendable (End) -> Void

    /// `timeoutMilliseconds` counts from now; `transport` is the client's
    /// (its `cancelInFlight()` ends the wait).
    package init(timeoutMilliseconds: Int, operation: CancellationToken, transport: HTTPTransport,
                 onEnd: @escaping @Sendable (End) -> Void) {
        deadline = Deadline(milliseconds: max(0, timeoutMilliseconds), after: monotonicNow())
        self.operation = operation
        inFlight = transport.inFlight
        generation = transport.inFlight.generation
        self.onEnd = onEnd
    }

    /// How it was cancelled, if it was.
    var cancellation: End? {
        if operation.isCancelled { return .cancelledByOperation }
        if inFlight.generation != generation { return .cancelledByClient }
        return nil
    }
}
