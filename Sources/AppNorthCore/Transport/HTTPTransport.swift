import CCurl
import Synchronization

/// libcurl must be initialised once per process before any other curl call.
/// A Swift global is initialised exactly once, thread-safely. It is never
/// cleaned up: a host that exits with live handles must not crash.
private let curlGlobalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

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
public final class HTTPTransport: Sendable {
    public let timeouts: HTTPTimeouts
    /// Responses larger than this fail with `.tooLarge` instead of growing
    /// memory without bound.
    public let maxResponseBytes: Int
    private let pool = Lock<[TransferSlot]>([])
    let userAgent: String
    /// CA, pins and proxy for every transfer.
    public let trust: HTTPTrust
    /// DEBUG traces each request: method, path, status, duration, bytes.
    let logger: Logger
    /// Ends the transfers in flight on `cancelInFlight()`.
    let inFlight = InFlightTransfers()

    public init(timeouts: HTTPTimeouts = .default, maxResponseBytes: Int = 16 << 20,
                userAgent: String = "libappnorth/\(AppNorthVersion.string)", logger: Logger = .silent,
                trust: HTTPTrust = HTTPTrust()) {
        _ = curlGlobalInit
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
    /// `whileWaiting` runs at most once, on this thread, as soon as the whole
    /// request has gone out and before the answer is read: work that can
    /// overlap the server's (the event upload prepares its next batch). It
    /// should take milliseconds, not seconds; it does not run when the
    /// transfer ends first.
    public func perform(_ request: HTTPRequest, cancel: StreamCancellation? = nil,
                        logger: Logger? = nil, whileWaiting: (() -> Void)? = nil) throws(AppNorthError) -> HTTPResponse {
        let context = TransferContext(limit: maxResponseBytes, onData: nil)
        context.cancel = cancel
        context.operation = OperationScope.current
        context.whileWaiting = whileWaiting
        context.requestBodyBytes = request.body?.count ?? 0
        context.generation = inFlight.generation
        let trace = RequestTrace(request, logger ?? self.logger)
        let status: Int
        do {
            status = try run(request, context: context,
                             totalTimeoutMs: timeouts.milliseconds(for: request.kind), idleTimeoutMs: 0)
        } catch {
            trace.failed(error)
            throw error
        }
        trace.finished(status: status, received: context.body.count, over: context.protocolName)
        return HTTPResponse(status: status, headers: context.headers, body: context.body,
                            connectionsOpened: context.connectionsOpened, protocolName: context.protocolName)
    }

    /// Sends a request and hands each received chunk of a 2xx body to
    /// `onChunk` as it arrives (for Server-Sent Events). There is no total
    /// timeout; the transfer fails when nothing arrives for
    /// `idleTimeoutMs`, when `onChunk` returns false, or when `cancel` is
    /// set from another thread. Returns the final response; its body holds
    /// the body of a non-2xx answer.
    public func stream(_ request: HTTPRequest, idleTimeoutMs: Int, cancel: StreamCancellation, logger: Logger? = nil,
                       onChunk: @escaping ([UInt8]) -> Bool) throws(AppNorthError) -> HTTPResponse {
        let context = TransferContext(limit: maxResponseBytes, onData: onChunk)
        context.cancel = cancel
        context.generation = inFlight.generation
        let trace = RequestTrace(request, logger ?? self.logger)
        let status: Int
        do {
            status = try run(request, context: context, totalTimeoutMs: 0, idleTimeoutMs: idleTimeoutMs)
        } catch {
            trace.failed(error)
            throw error
        }
        trace.finished(status: status, received: context.body.count, over: context.protocolName)
        return HTTPResponse(status: status, headers: context.headers, body: context.body,
                            protocolName: context.protocolName)
    }

    /// Ends every transfer in flight at this moment with `.cancelled`, at
    /// once; transfers started afterwards run normally. Callable from any
    /// thread; never blocks on a transfer.
    public func cancelInFlight() {
        inFlight.cancelAll()
    }

    /// Moves on every `cancelInFlight()`: a wait that began under an older
    /// value was cancelled.
    public var cancelGeneration: UInt64 { inFlight.generation }

    // MARK: -

    private func run(_ request: HTTPRequest, context: TransferContext,
                     totalTimeoutMs: Int, idleTimeoutMs: Int) throws(AppNorthError) -> Int {
        let slot = try borrow()
        defer { giveBack(slot) }
        context.inFlight = inFlight
        let easy = try EasyTransfer(request, context: context, transport: self,
                                    totalTimeoutMs: totalTimeoutMs, idleTimeoutMs: idleTimeoutMs)
        let code = Self.perform(easy.handle, on: slot, context: context, idleTimeoutMs: idleTimeoutMs)
        return try easy.finish(code)
    }

    /// CA, TLS floor, pins and proxy (HTTPTrust.apply), set on every
    /// transfer's fresh easy handle.
    func applyTrust(_ h: UnsafeMutableRawPointer) { trust.apply(to: h) }

    /// Runs a transfer on the slot's multi handle, whose connection cache
    /// outlives the easy handle. A cancellable transfer is woken at once by
    /// `StreamCancellation.cancel()` (curl's easy loop only checks the
    /// progress callback about once a second while a stream is idle), and
    /// its idle time is measured exactly (curl's low-speed check averages
    /// over several seconds, so a burst at connect would hide a silent
    /// stream).
    private static func perform(_ h: UnsafeMutableRawPointer, on slot: TransferSlot, context: TransferContext,
                                idleTimeoutMs: Int) -> CURLcode {
        let multi = slot.multi
        let cancel = context.cancel
        // Registered first, so a client cancel from now on wakes this
        // transfer, and one since it began is seen by the check below.
        context.inFlight?.register(slot)
        defer { context.inFlight?.unregister(slot) }
        // Cancelled before it started: send nothing (the first multi_perform
        // below may already write the request).
        if context.isCancelled { return CURLE_ABORTED_BY_CALLBACK }
        guard curl_multi_add_handle(multi, h) == CURLM_OK else { return CURLE_FAILED_INIT }
        cancel?.attach(multi)
        context.operation?.attach(multi)
        defer {
            context.operation?.detach()
            cancel?.detach()
            curl_multi_remove_handle(multi, h)
        }
        context.lastActivityNs = monotonicNow()
        var running: Int32 = 0
        var mcode = curl_multi_perform(multi, &running)
        while mcode == CURLM_OK && running > 0 && !context.isCancelled {
            var waitMs: Int32 = 1000
            if idleTimeoutMs > 0 {
                let now = monotonicNow()
                let idle = Deadline(milliseconds: idleTimeoutMs, after: context.lastActivityNs)
                if idle.hasPassed(at: now) {
                    context.idledOut = true
                    return CURLE_OPERATION_TIMEDOUT
                }
                // A stream sleeps until data, its idle deadline, or a wake-up
                // (a cancel or stop calls curl_multi_wakeup): an idle stream
                // wakes once per server keepalive, not once a second.
                waitMs = Int32(clamping: idle.sleepMilliseconds(at: now))
            }
            if let waiting = context.whileWaiting, requestSent(h, context) {
                context.whileWaiting = nil
                waiting()
                if context.isCancelled { break }
            }
            mcode = curl_multi_poll(multi, nil, 0, waitMs, nil)
            if mcode != CURLM_OK || context.isCancelled { break }
            mcode = curl_multi_perform(multi, &running)
        }
        if context.isCancelled { return CURLE_ABORTED_BY_CALLBACK }
        guard mcode == CURLM_OK else { return CURLE_RECV_ERROR }
        var result = CURLE_RECV_ERROR
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            if message.pointee.msg == CURLMSG_DONE { result = message.pointee.data.result }
        }
        return result
    }

    /// Whether the request, body included, has gone out (curl counts the
    /// body bytes it has sent; the headers go before them).
    private static func requestSent(_ h: UnsafeMutableRawPointer, _ context: TransferContext) -> Bool {
        var sent: curl_off_t = 0
        guard cshim_getinfo_offset(h, CURLINFO_SIZE_UPLOAD_T, &sent) == CURLE_OK else { return false }
        return sent >= curl_off_t(context.requestBodyBytes)
    }

    private func borrow() throws(AppNorthError) -> TransferSlot {
        if let slot = pool.withLock({ $0.popLast() }) { return slot }
        guard let multi = curl_multi_init() else { throw .internal("curl_multi_init failed") }
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

/// Lets another thread end a streaming transfer. Cancelling wakes a
/// transfer in progress at once; one started after `cancel()` ends at once.
/// A cancellation may serve several transfers in turn (one at a time).
public final class StreamCancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    /// The multi handle of the transfer in progress, woken by cancel().
    private let running = Lock<MultiHandle?>(nil)
    public init() {}

    public func cancel() {
        flag.store(true, ordering: .releasing)
        running.withLock { if let multi = $0 { curl_multi_wakeup(multi.raw) } }
    }

    public var isCancelled: Bool { flag.load(ordering: .acquiring) }

    func attach(_ multi: UnsafeMutableRawPointer) {
        running.withLock { $0 = MultiHandle(raw: multi) }
    }

    func detach() {
        running.withLock { $0 = nil }
    }
}

/// The transfers of one transport in progress, for `cancelInFlight()`: a
/// generation that each transfer compares with the one it started under,
/// and their multi handles, woken so that a transfer waiting in
/// curl_multi_poll notices at once.
final class InFlightTransfers: Sendable {
    private let counter = Atomic<UInt64>(0)
    private let running = Lock<[ObjectIdentifier: MultiHandle]>([:])

    var generation: UInt64 { counter.load(ordering: .acquiring) }

    func cancelAll() {
        // Under the lock: a transfer unregisters (under it too) before its
        // multi handle can be reused or cleaned up.
        running.withLock { handles in
            counter.add(1, ordering: .acquiringAndReleasing)
            for handle in handles.values { curl_multi_wakeup(handle.raw) }
        }
    }

    func register(_ slot: TransferSlot) {
        register(ObjectIdentifier(slot), multi: slot.multi)
    }

    func unregister(_ slot: TransferSlot) {
        unregister(ObjectIdentifier(slot))
    }

    /// A transfer on a shared multi handle (TransferEngine's), by its own key.
    func register(_ key: ObjectIdentifier, multi: UnsafeMutableRawPointer) {
        running.withLock { $0[key] = MultiHandle(raw: multi) }
    }

    func unregister(_ key: ObjectIdentifier) {
        _ = running.withLock { $0.removeValue(forKey: key) }
    }
}

/// A curl multi handle; curl_multi_wakeup may be called from any thread.
struct MultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

/// An owned curl multi handle and its connection cache. Only one transfer
/// uses it at a time.
final class TransferSlot: @unchecked Sendable {
    let multi: UnsafeMutableRawPointer
    init(_ multi: UnsafeMutableRawPointer) { self.multi = multi }
    func close() { curl_multi_cleanup(multi) }
}

