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
    private let userAgent: String
    /// CA, pins and proxy for every transfer.
    public let trust: HTTPTrust
    /// DEBUG traces each request: method, path, status, duration, bytes.
    private let logger: Logger
    /// Ends the transfers in flight on `cancelInFlight()`.
    private let inFlight = InFlightTransfers()

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
        guard let h = curl_easy_init() else { throw .internal("curl_easy_init failed") }
        defer { curl_easy_cleanup(h) }

        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        // No "Expect: 100-continue" round trip before a body.
        headerList = curl_slist_append(headerList, "Expect:")

        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let unmanaged = Unmanaged.passRetained(context)
        defer { unmanaged.release() }
        let contextPointer = unmanaged.toOpaque()

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errbuf in
            request.url.withCString { url in
                cshim_setopt_pointer(h, CURLOPT_URL, url)
                cshim_setopt_pointer(h, CURLOPT_USERAGENT, userAgent)
                cshim_setopt_pointer(h, CURLOPT_HTTPHEADER, headerList)
                cshim_setopt_pointer(h, CURLOPT_ERRORBUFFER, errbuf.baseAddress)
                cshim_setopt_long(h, CURLOPT_NOSIGNAL, 1)          // threads: no SIGALRM
                cshim_setopt_long(h, CURLOPT_SSL_VERIFYPEER, 1)
                cshim_setopt_long(h, CURLOPT_SSL_VERIFYHOST, 2)
                cshim_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0)
                cshim_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 1)
                cshim_setopt_long(h, CURLOPT_PROTOCOLS, Int(CURLPROTO_HTTP | CURLPROTO_HTTPS))
                // Sends "Accept-Encoding: gzip" and inflates a gzip answer
                // (the response size limit counts the inflated bytes).
                cshim_setopt_pointer(h, CURLOPT_ACCEPT_ENCODING, "gzip")
                // ALPN offers h2 then http/1.1 over TLS; plain http stays HTTP/1.1
                // (no cleartext h2 upgrade, which proxies and old servers mishandle).
                // A libcurl without nghttp2 refuses the option and stays on HTTP/1.1.
                cshim_setopt_long(h, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
                applyTrust(h)
                cshim_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, timeouts.connectMilliseconds)
                cshim_setopt_long(h, CURLOPT_TIMEOUT_MS, totalTimeoutMs)
                // A stream's idle time is measured in `perform`, exactly; no
                // CURLOPT_LOW_SPEED_*: curl's speed check re-arms a 1 s timer
                // while a transfer is below the limit, which woke an idle
                // stream's thread every second (68 wakeups a minute against a
                // 15 s keepalive).
                cshim_setopt_write_function(h, CURLOPT_WRITEFUNCTION, transferWriteBody)
                cshim_setopt_pointer(h, CURLOPT_WRITEDATA, contextPointer)
                cshim_setopt_write_function(h, CURLOPT_HEADERFUNCTION, transferWriteHeader)
                cshim_setopt_pointer(h, CURLOPT_HEADERDATA, contextPointer)
                if context.cancel != nil {
                    cshim_setopt_long(h, CURLOPT_NOPROGRESS, 0)
                    cshim_setopt_xferinfo_function(h, transferProgress)
                    cshim_setopt_pointer(h, CURLOPT_XFERINFODATA, contextPointer)
                }
                switch request.method {
                case .get:
                    cshim_setopt_long(h, CURLOPT_HTTPGET, 1)
                case .post, .put, .delete:
                    if request.method != .post {
                        cshim_setopt_pointer(h, CURLOPT_CUSTOMREQUEST, request.method.rawValue)
                    }
                }
                let body = request.body ?? []
                if request.method != .get {
                    return body.withUnsafeBytes { bytes in
                        cshim_setopt_long(h, CURLOPT_POST, 1)
                        cshim_setopt_offset(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                        // curl reads the body in place during perform, which
                        // runs inside this closure.
                        cshim_setopt_pointer(h, CURLOPT_POSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                        return Self.perform(h, on: slot, context: context, idleTimeoutMs: idleTimeoutMs)
                    }
                }
                return Self.perform(h, on: slot, context: context, idleTimeoutMs: idleTimeoutMs)
            }
        }

        if code != CURLE_OK {
            if context.cancelledByClient {
                throw .cancelled("request cancelled by appnorth_client_cancel")
            }
            if context.overflowed {
                throw .tooLarge("response larger than \(maxResponseBytes) bytes")
            }
            if context.cancel?.isCancelled == true || context.stoppedByReceiver {
                throw .network("stream closed")
            }
            if context.idledOut {
                throw .network("stream idle for more than \(idleTimeoutMs) ms")
            }
            let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let summary = String(cString: curl_easy_strerror(code))
            throw .network(detail.isEmpty ? summary : "\(summary): \(detail)")
        }
        var status = 0
        cshim_getinfo_long(h, CURLINFO_RESPONSE_CODE, &status)
        var connects = 0
        cshim_getinfo_long(h, CURLINFO_NUM_CONNECTS, &connects)
        context.connectionsOpened = connects
        var version = 0
        cshim_getinfo_long(h, CURLINFO_HTTP_VERSION, &version)
        context.protocolName = HTTPResponse.protocolName(curlVersion: version)
        return status
    }

    /// CA, pins and proxy, set on every transfer's fresh easy handle; curl
    /// copies the strings and the blob.
    private func applyTrust(_ h: UnsafeMutableRawPointer) {
        if let pem = trust.caPEM {
            pem.withUnsafeBytes { _ = cshim_setopt_blob_copy(h, CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count) }
        } else if let file = trust.caFile {
            cshim_setopt_pointer(h, CURLOPT_CAINFO, file)
        }
        if let pins = trust.pinnedPublicKeys {
            cshim_setopt_pointer(h, CURLOPT_PINNEDPUBLICKEY, pins)
        }
        if let proxy = trust.proxyURL {
            cshim_setopt_pointer(h, CURLOPT_PROXY, proxy)
        } else if trust.ignoreProxyEnvironment {
            // An empty proxy string tells curl: no proxy, whatever the environment says.
            cshim_setopt_pointer(h, CURLOPT_PROXY, "")
        }
        if trust.ignoreProxyEnvironment {
            // Without this, an explicit proxy would still be bypassed for hosts in no_proxy.
            cshim_setopt_pointer(h, CURLOPT_NOPROXY, "")
        }
    }

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
        defer {
            cancel?.detach()
            curl_multi_remove_handle(multi, h)
        }
        let idleNs = UInt64(clamping: idleTimeoutMs).multipliedSaturating(by: 1_000_000)
        context.lastActivityNs = monotonicNow()
        var running: Int32 = 0
        var mcode = curl_multi_perform(multi, &running)
        while mcode == CURLM_OK && running > 0 && !context.isCancelled {
            var waitMs: Int32 = 1000
            if idleNs > 0 {
                let silent = monotonicNow() &- context.lastActivityNs
                if silent >= idleNs {
                    context.idledOut = true
                    return CURLE_OPERATION_TIMEDOUT
                }
                // A stream sleeps until data, its idle deadline, or a wake-up
                // (a cancel or stop calls curl_multi_wakeup): an idle stream
                // wakes once per server keepalive, not once a second.
                waitMs = Int32(clamping: (idleNs - silent) / 1_000_000 + 1)
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

    fileprivate func attach(_ multi: UnsafeMutableRawPointer) {
        running.withLock { $0 = MultiHandle(raw: multi) }
    }

    fileprivate func detach() {
        running.withLock { $0 = nil }
    }
}

/// The transfers of one transport in progress, for `cancelInFlight()`: a
/// generation that each transfer compares with the one it started under,
/// and their multi handles, woken so that a transfer waiting in
/// curl_multi_poll notices at once.
private final class InFlightTransfers: Sendable {
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
        running.withLock { $0[ObjectIdentifier(slot)] = MultiHandle(raw: slot.multi) }
    }

    func unregister(_ slot: TransferSlot) {
        _ = running.withLock { $0.removeValue(forKey: ObjectIdentifier(slot)) }
    }
}

/// A curl multi handle; curl_multi_wakeup may be called from any thread.
private struct MultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

/// An owned curl multi handle and its connection cache. Only one transfer
/// uses it at a time.
private final class TransferSlot: @unchecked Sendable {
    let multi: UnsafeMutableRawPointer
    init(_ multi: UnsafeMutableRawPointer) { self.multi = multi }
    func close() { curl_multi_cleanup(multi) }
}

/// State shared with curl's C callbacks for one transfer.
private final class TransferContext {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var status = 0
    let limit: Int
    let onData: (([UInt8]) -> Bool)?
    var cancel: StreamCancellation?
    /// The transport's in-flight set and its generation when this transfer
    /// began: a later generation means the client cancelled it.
    var inFlight: InFlightTransfers?
    var generation: UInt64 = 0
    var overflowed = false
    var connectionsOpened = 0
    var protocolName = ""
    var stoppedByReceiver = false
    /// When bytes last arrived (monotonic ns), for the stream idle timeout.
    var lastActivityNs: UInt64 = 0
    var idledOut = false
    /// `perform`'s work to overlap the server's, until it has run.
    var whileWaiting: (() -> Void)?
    var requestBodyBytes = 0

    init(limit: Int, onData: (([UInt8]) -> Bool)?) {
        self.limit = limit
        self.onData = onData
    }

    var cancelledByClient: Bool { inFlight.map { $0.generation != generation } ?? false }

    /// The host's stream cancellation or a client cancel ended it.
    var isCancelled: Bool { cancel?.isCancelled == true || cancelledByClient }

    var isStreamingSuccess: Bool { onData != nil && (200...299).contains(status) }
}

private func transferWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                               _ user: UnsafeMutableRawPointer?) -> Int {
    let context = Unmanaged<TransferContext>.fromOpaque(user!).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    context.lastActivityNs = monotonicNow()
    let chunk = UnsafeRawBufferPointer(start: data, count: length)
    if context.isStreamingSuccess, let onData = context.onData {
        if !onData(Array(chunk)) {
            context.stoppedByReceiver = true
            return 0
        }
        return length
    }
    if context.body.count + length > context.limit {
        context.overflowed = true
        return 0
    }
    context.body.append(contentsOf: chunk)
    return length
}

private func transferWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                 _ user: UnsafeMutableRawPointer?) -> Int {
    let context = Unmanaged<TransferContext>.fromOpaque(user!).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    context.lastActivityNs = monotonicNow()
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        // A new status line (after 100 Continue or a redirect) starts over.
        context.headers.removeAll()
        let parts = line.split(separator: " ")
        if parts.count >= 2, let status = Int(parts[1]) { context.status = status }
        return length
    }
    if let colon = line.firstIndex(of: ":") {
        let name = String(line[..<colon])
        let value = String(Text.trimmed(String(line[line.index(after: colon)...])))
        context.headers.append((name, value))
    }
    return length
}

private func transferProgress(_ user: UnsafeMutableRawPointer?, _ dlTotal: curl_off_t, _ dlNow: curl_off_t,
                              _ ulTotal: curl_off_t, _ ulNow: curl_off_t) -> Int32 {
    let context = Unmanaged<TransferContext>.fromOpaque(user!).takeUnretainedValue()
    return context.isCancelled ? 1 : 0
}

private func monotonicNow() -> UInt64 { SystemClock().monotonicNanoseconds() }
