/// What may end a wait on another thread's work (an events flush waiting
/// for its upload cycle): a client cancel (`cancelInFlight()`) since the
/// wait began, or the cancel of the waiting thread's operation.
struct WaitCancellation {
    private let transport: HTTPTransport
    private let generation: UInt64
    private let operation: CancellationToken?

    init(_ transport: HTTPTransport) {
        self.transport = transport
        generation = transport.cancelGeneration
        operation = OperationScope.current
    }

    var isCancelled: Bool { error != nil }

    /// The `.cancelled` error to throw, once cancelled.
    var error: AppNorthError? {
        if operation?.isCancelled == true { return Self.operationCancelled }
        if transport.cancelGeneration != generation { return Self.clientCancelled }
        return nil
    }

    static let operationCancelled = AppNorthError.cancelled("flush cancelled (its operation was cancelled); events stay queued")
    static let clientCancelled = AppNorthError.cancelled("flush cancelled by appnorth_client_cancel; events stay queued")
}
