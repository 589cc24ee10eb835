/// The transfer engine as the parts above Async see it: a request sent
/// without a thread waiting (the client's non-blocking calls), a wait
/// watched without a thread (`AsyncWait`: the non-blocking events flush).
/// Client/, Events/ and Config/ reach the engine through these only: no
/// folder but Async/ names a type of Engine/ (scripts/check-layers.py).
package enum AsyncTransfers {
    /// Starts `request`, set up by `transport`, on the process's transfer
    /// thread and returns at once. `completion` runs exactly once, on that
    /// thread, with what `transport.perform` would have returned or thrown:
    /// `.cancelled` once `operation` is cancelled or on the transport's
    /// `cancelInFlight()`. Throws (and never calls `completion`) only when
    /// the transfer cannot be set up or the transfer thread has stopped.
    package static func send(_ request: HTTPRequest, with transport: HTTPTransport, operation: CancellationToken,
                             logger: Logger? = nil,
                             completion: @escaping @Sendable (Result<HTTPResponse, AppNorthError>) -> Void) throws(AppNorthError) {
        try TransferEngine.send(request, with: transport, operation: operation, logger: logger, completion: completion)
    }
}

/// A wait that holds no thread: the transfer engine's thread watches its
/// deadline and its `Cancellation`, and whoever sees the awaited thing
/// happen calls `reach()`. It ends exactly once, on the engine's thread,
/// with no lock held: `onEnd` gets how (`.reached`, `.timedOut`,
/// `.cancelled(reason)`, `.cancelled(.stopped)` when the engine stops first).
package struct AsyncWait: Sendable {
    package typealias End = EngineWait.End

    private let engine: TransferEngine
    private let wait: EngineWait

    /// Starts watching: `timeoutMilliseconds` counts from now. Throws, and
    /// never calls `onEnd`, when the transfer thread cannot start or has stopped.
    package static func watch(timeoutMilliseconds: Int, cancellation: Cancellation,
                              onEnd: @escaping @Sendable (End) -> Void) throws(AppNorthError) -> AsyncWait {
        let engine = try TransferEngine.shared()
        let wait = EngineWait(timeoutMilliseconds: timeoutMilliseconds, cancellation: cancellation, onEnd: onEnd)
        try engine.watch(wait)
        return AsyncWait(engine: engine, wait: wait)
    }

    /// What it waited for happened: it ends `.reached`, unless it ended
    /// already. Callable from any thread.
    package func reach() {
        engine.reach(wait)
    }
}
