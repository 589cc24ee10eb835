/// Whether a piece of work was cancelled, and by whom: the one value every
/// transfer (`TransferContext`), engine wait (`EngineWait`: an events flush,
/// a job waiting for an op worker) and blocking flush wait asks.
///
/// It holds the operation's token, if any, and its client's in-flight
/// set with the generation captured when the value was made: a client
/// cancel (`HTTPTransport.cancelInFlight()`) counts only if it came after
/// the capture, so work started after a client cancel runs normally.
/// A value, cheap to copy; the tokens it reads are shared and final.
package struct Cancellation: Sendable {
    /// Why it was cancelled. When both happened the operation wins: it is
    /// the narrower cancel (this one piece of work), and every error
    /// message said so first before this value existed.
    package enum Reason: Sendable, Equatable {
        /// Its operation's token (`appnorth_op_cancel`, a free, a task).
        case operation
        /// Its client's `cancelInFlight()` (`appnorth_client_cancel`).
        case client
        /// The transfer engine stopped while it held the work (its last
        /// `SharedThreads` holder was freed, or appnorth_shutdown): set by
        /// the engine on what it ends, never read from the tokens.
        case stopped
    }

    /// The operation's token; nil: no operation cancels it.
    let operation: CancellationToken?
    /// The client's in-flight transfers; nil: no client cancels it.
    let client: InFlightTransfers?
    private let generation: UInt64

    /// Never cancelled (a transfer with no operation and no client).
    init() {
        operation = nil
        client = nil
        generation = 0
    }

    /// Captures `client`'s generation now.
    init(operation: CancellationToken?, client: InFlightTransfers?) {
        self.operation = operation
        self.client = client
        generation = client?.generation ?? 0
    }

    /// Captures `transport`'s in-flight generation now.
    package init(operation: CancellationToken?, transport: HTTPTransport) {
        self.init(operation: operation, client: transport.inFlight)
    }

    /// Why it is cancelled, nil while it is not (see `Reason` for the order).
    package var reason: Reason? {
        if operation?.isCancelled == true { return .operation }
        if let client, client.generation != generation { return .client }
        return nil
    }

    package var isCancelled: Bool { reason != nil }

    /// From now until `detach(key)`, a cancel of either kind wakes `waker`.
    func attach(_ waker: TransferWaker, key: ObjectIdentifier) {
        operation?.attach(waker, key: key)
        client?.register(key, waker: waker)
    }

    func detach(_ key: ObjectIdentifier) {
        operation?.detach(key)
        client?.unregister(key)
    }
}
