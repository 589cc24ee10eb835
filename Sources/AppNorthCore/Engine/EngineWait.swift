/// A wait that holds no thread (the non-blocking events flush waiting for
/// its upload cycle, a job waiting for an op worker): the transfer
/// engine's thread watches its deadline and its `Cancellation`, and whoever
/// sees the awaited thing happen calls `TransferEngine.reach`. It ends
/// exactly once, on the engine thread, with no lock held: `onEnd` gets how.
///
/// A cancel of its operation or of its client (`cancelInFlight()`) wakes
/// the engine, which ends the wait within a sweep (a few milliseconds).
package final class EngineWait: Sendable {
    package enum End: Sendable, Equatable {
        case reached, timedOut
        case cancelled(Cancellation.Reason)
    }

    let deadline: Deadline
    let cancellation: Cancellation
    let onEnd: @Sendable (End) -> Void

    /// `timeoutMilliseconds` counts from now; a client cancel counts from
    /// when `cancellation` was made.
    package convenience init(timeoutMilliseconds: Int, cancellation: Cancellation,
                             onEnd: @escaping @Sendable (End) -> Void) {
        self.init(deadline: Deadline(milliseconds: max(0, timeoutMilliseconds), after: monotonicNow()),
                  cancellation: cancellation, onEnd: onEnd)
    }

    /// Ends `.timedOut` at `deadline` (an operation's, counted from its start).
    package init(deadline: Deadline, cancellation: Cancellation, onEnd: @escaping @Sendable (End) -> Void) {
        self.deadline = deadline
        self.cancellation = cancellation
        self.onEnd = onEnd
    }

    /// How it was cancelled, if it was.
    var cancelled: End? { cancellation.reason.map(End.cancelled) }
}
