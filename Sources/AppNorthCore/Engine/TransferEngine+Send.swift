extension TransferEngine {
    /// Starts `request`, set up by `transport` (its timeouts, trust, proxy
    /// and limits), on the process's transfer thread and returns at once.
    /// `completion` runs exactly once, on that thread, with what
    /// `HTTPTransport.perform` would have returned or thrown: `.cancelled`
    /// once `operation` is cancelled or on the transport's
    /// `cancelInFlight()`. Throws (and never calls `completion`) only when
    /// the transfer cannot be set up or the engine has stopped.
    static func send(_ request: HTTPRequest, with transport: HTTPTransport, operation: CancellationToken,
                     logger: Logger?,
                     completion: @escaping @Sendable (Result<HTTPResponse, AppNorthError>) -> Void) throws(AppNorthError) {
        let context = TransferContext(limit: transport.maxResponseBytes, onData: nil)
        context.cancellation = Cancellation(operation: operation, client: transport.inFlight)
        let transfer = try EasyTransfer(request, context: context, transport: transport,
                                        totalTimeoutMs: transport.timeouts.milliseconds(for: request.kind), idleTimeoutMs: 0)
        let trace = RequestTrace(request, logger ?? transport.logger)
        try shared().add(Job(transfer: transfer) { code in
            completion(Result { () throws(AppNorthError) -> HTTPResponse in
                try trace.record { () throws(AppNorthError) -> HTTPResponse in try transfer.finish(code) }
            })
        })
    }
}
