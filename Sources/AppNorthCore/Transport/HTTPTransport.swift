import CCurl
import Synchronization

/// HTTP over libcurl: keep-alive connection reuse, TLS verification on,
/// separate API and resource timeouts, and streaming responses.
///
/// Protocol: https offers HTTP/2 and HTTP/1.1 in ALPN and uses what the
/// server picks (CURL_HTTP_VERSION_2TLS); plain http is HTTP/1.1. Each
/// response says which was used (`HTTPResponse.protocolName`, also in the
/// DEBUG trace line).
///
/// Thread-safe: each transfer borrows a slot from a small pool. A slot is a
/// curl multi handle whose connection cache keeps connections alive between
/// transfers; every transfer runs on a fresh easy handle added to it.
/// (Fuzzing found that libcurl 7.88 reads freed memory when an easy handle
/// that finished one transfer receives a response with a folded header
/// line: no easy handle is ever reused.)
package final class HTTPTransport: Sendable {
    package let timeouts: HTTPTimeouts
    /// Responses larger than this fail with `.tooLarge` instead of growing
    /// memory without bound.
    package let maxResponseBytes: Int
    private let pool = Lock<[TransferSlot]>([], level: LockClass.transportPool)
    let userAgent: String
    /// CA, pins and proxy for every transfer.
    package let trust: HTTPTrust
    /// DEBUG traces each request: method, path, status, duration, bytes.
    let logger: Logger
    /// Ends the transfers in flight on `cancelInFlight()`.
    let inFlight = InFlightTransfers()

    package init(timeouts: HTTPTimeouts = .default, maxResponseBytes: Int = 16 << 20,
                userAgent: String = "libappnorth/\(AppNorthVersion.string)", logger: Logger = .silent,
                trust: HTTPTrust = HTTPTrust()) {
        _ = CurlFeatures.initialised
        self.timeouts = timeouts
        self.trust = trust
        self.maxResponseBytes = maxResponseBytes
        self.userAgent = userAgent
        self.logger = logger
    }

    /// Sends a request and collects the whole response. Throws `.network`
    /// when no HTTP response arrived; any status, including errors, is a
    /// response.
    /// `cancel`, when given and set from another thread, aborts the
    /// transfer within about a second (a `.network` error). `logger`: where
    /// the request's DEBUG trace goes (default: the transport's).
    package func perform(_ request: HTTPRequest, cancel: CancellationToken? = nil,
                        logger: Logger? = nil) throws(AppNorthError) -> HTTPResponse {
        let context = TransferContext(limit: maxResponseBytes, onData: nil)
        context.stop = cancel
        return try exchange(request, context, operation: OperationScope.current, logger: logger,
                            totalTimeoutMs: try totalTimeout(for: request), idleTimeoutMs: 0)
    }

    /// `request`'s total timeout: its kind's, or less when it is the first
    /// request of an operation that started earlier (`OperationScope`):
    /// then it must end by the operation's deadline. Throws `.timeout`,
    /// and nothing is sent, when that deadline has passed.
    private func totalTimeout(for request: HTTPRequest) throws(AppNorthError) -> Int {
        let own = timeouts.milliseconds(for: request.kind)
        guard let deadline = OperationScope.takeRequestDeadline() else { return own }
        let left = deadline.remainingMillisecondsRoundedUp(at: monotonicNow())
        guard left > 0 else {
            throw .timeout("its operation's timeout passed while it waited for a worker; nothing was sent")
        }
        return own > 0 ? min(own, left) : left
    }

    /// Sends a request and hands each received chunk of a 2xx body to
    /// `onChunk` as it arrives (for Server-Sent Events). There is no total
    /// timeout; the transfer fails when nothing arrives for
    /// `idleTimeoutMs`, when `onChunk` returns false, or when `cancel` is
    /// set from another thread. Returns the final response; its body holds
    /// the body of a non-2xx answer.
    package func stream(_ request: HTTPRequest, idleTimeoutMs: Int, cancel: CancellationToken, logger: Logger? = nil,
                       onChunk: @escaping ([UInt8]) -> Bool) throws(AppNorthError) -> HTTPResponse {
        let context = TransferContext(limit: maxResponseBytes, onData: onChunk)
        context.stop = cancel
        return try exchange(request, context, operation: nil, logger: logger, totalTimeoutMs: 0, idleTimeoutMs: idleTimeoutMs)
    }

    /// Ends every transfer in flight at this moment with `.cancelled`, at
    /// once; transfers started afterwards run normally. Callable from any
    /// thread; never blocks on a transfer.
    package func cancelInFlight() {
        inFlight.cancelAll()
    }

    // MARK: -

    /// What `perform` and `stream` share: a slot from the pool, a fresh
    /// easy handle for `request`, the transfer on this thread, its trace.
    /// A client cancel counts from here on.
    private func exchange(_ request: HTTPRequest, _ context: TransferContext, operation: CancellationToken?,
                          logger: Logger?, totalTimeoutMs: Int, idleTimeoutMs: Int) throws(AppNorthError) -> HTTPResponse {
        context.cancellation = Cancellation(operation: operation, client: inFlight)
        return try RequestTrace(request, logger ?? self.logger).record { () throws(AppNorthError) -> HTTPResponse in
            let slot = try borrow()
            defer { giveBack(slot) }
            let easy = try EasyTransfer(request, context: context, transport: self,
                                        totalTimeoutMs: totalTimeoutMs, idleTimeoutMs: idleTimeoutMs)
            return try easy.finish(slot.run(easy))
        }
    }

    /// CA, TLS floor, pins and proxy (HTTPTrust.apply), set on every
    /// transfer's fresh easy handle.
    func applyTrust(_ h: UnsafeMutableRawPointer) { trust.apply(to: h) }

    private func borrow() throws(AppNorthError) -> TransferSlot {
        if let slot = pool.withLock({ $0.popLast() }) { return slot }
        guard let multi = cshim_multi_init_cloexec() else { throw .internal("curl_multi_init failed") }
        return TransferSlot(multi)
    }

    /// Keeps a few idle slots (and their live connections) for reuse.
    private func giveBack(_ slot: TransferSlot) {
        let kept = pool.withLock { slots -> Bool in
            guard slots.count < 8 else { return false }
            slots.append(slot)
            return true
        }
        if !kept { slot.close() }
    }

    deinit {
        for slot in pool.withLock({ $0 }) { slot.close() }
    }
}

extension LockClass {
    /// `HTTPTransport.pool`: the idle blocking transfer slots.
    static let transportPool = LockClass.leaf("HTTPTransport.pool")
}
