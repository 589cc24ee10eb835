import CCurl
import Glibc

/// One transfer's curl easy handle and everything it points at (URL,
/// header list, error buffer, request body, the callbacks' context), set up
/// the same way for a blocking transfer (`HTTPTransport.perform`) and a
/// non-blocking one (`TransferEngine`). Whoever runs it adds `handle` to a
/// multi handle, removes it when done, then calls `finish`. Freed (easy
/// handle included) when the last reference goes.
final class EasyTransfer: @unchecked Sendable {
    // @unchecked: used by one thread at a time (the one running the transfer).
    let handle: UnsafeMutableRawPointer
    let context: TransferContext
    let idleTimeoutMs: Int
    private let maxResponseBytes: Int
    private var headerList: UnsafeMutablePointer<curl_slist>? = nil
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let url: UnsafeMutablePointer<CChar>
    /// "scheme://host:port" of the URL: the transfers that share a
    /// connection limit (TransferEngine admits a few per origin at a time).
    let origin: String
    /// The whole transfer's limit in ms (0: none), counted from its start.
    let totalTimeoutMs: Int
    private let body: UnsafeMutableRawBufferPointer
    private let unmanagedContext: Unmanaged<TransferContext>

    init(_ request: HTTPRequest, context: TransferContext, transport: HTTPTransport,
         totalTimeoutMs: Int, idleTimeoutMs: Int) throws(AppNorthError) {
        guard let h = CurlFeatures.makeEasy() else { throw .internal("curl_easy_init failed") }
        handle = h
        self.context = context
        self.idleTimeoutMs = idleTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        origin = Self.origin(of: request.url)
        maxResponseBytes = transport.maxResponseBytes
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        url = request.url.withCString { strdup($0) }
        let bytes = request.body ?? []
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
        bytes.withUnsafeBytes { copy.copyMemory(from: $0) }
        body = copy
        unmanagedContext = Unmanaged.passRetained(context)
        for (name, value) in request.headers {
            // withCString: a native string's own bytes, no utf8CString copy.
            headerList = "\(name): \(value)".withCString { curl_slist_append(headerList, $0) }
        }
        // No "Expect: 100-continue" round trip before a body.
        headerList = curl_slist_append(headerList, "Expect:")
        configure(request, transport, totalTimeoutMs: totalTimeoutMs, bodyBytes: bytes.count)
    }

    /// The URL up to the end of its authority ("http://127.0.0.1:8080"),
    /// found in its UTF-8 (no Character iteration on this path).
    static func origin(of url: String) -> String {
        var url = url
        return url.withUTF8 { origin(of: $0) }
    }

    private static func origin(of bytes: UnsafeBufferPointer<UInt8>) -> String {
        var start = 0
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.count > colon + 2,
           bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") {
            start = colon + 3
        }
        let end = bytes[start...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<(end ?? bytes.count)]), as: UTF8.self)
    }

    /// Sets the whole transfer's limit again before curl starts it, for the
    /// time it already waited in TransferEngine's queue.
    func setTotalTimeout(milliseconds: Int) {
        cshim_setopt_long(handle, CURLOPT_TIMEOUT_MS, milliseconds)
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
        free(url)
        body.deallocate()
        unmanagedContext.release()
    }

    private func configure(_ request: HTTPRequest, _ transport: HTTPTransport, totalTimeoutMs: Int, bodyBytes: Int) {
        let h = handle
        let contextPointer = unmanagedContext.toOpaque()
        cshim_setopt_pointer(h, CURLOPT_URL, url)
        transport.userAgent.withCString { _ = cshim_setopt_pointer(h, CURLOPT_USERAGENT, $0) }  // curl copies it
        cshim_setopt_pointer(h, CURLOPT_HTTPHEADER, headerList)
        cshim_setopt_pointer(h, CURLOPT_ERRORBUFFER, errorBuffer)
        cshim_setopt_long(h, CURLOPT_NOSIGNAL, 1)          // threads: no SIGALRM
        cshim_setopt_cloexec_sockets(h)                    // no connection leaks into a host's exec
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
        transport.applyTrust(h)
        cshim_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, transport.timeouts.connectMilliseconds)
        cshim_setopt_long(h, CURLOPT_TIMEOUT_MS, totalTimeoutMs)
        // A stream's idle time is measured in `HTTPTransport.perform`,
        // exactly; no CURLOPT_LOW_SPEED_*: curl's speed check re-arms a 1 s
        // timer while a transfer is below the limit, which woke an idle
        // stream's thread every second (68 wakeups a minute against a 15 s
        // keepalive).
        cshim_setopt_write_function(h, CURLOPT_WRITEFUNCTION, transferWriteBody)
        cshim_setopt_pointer(h, CURLOPT_WRITEDATA, contextPointer)
        if context.onData != nil || !CurlFeatures.keepsFields {
            // A stream reads its status (and notes activity) from each
            // header line as it comes; other answers read the fields the
            // core uses from curl once done (`finish`), with no callback
            // per line.
            cshim_setopt_write_function(h, CURLOPT_HEADERFUNCTION, transferWriteHeader)
            cshim_setopt_pointer(h, CURLOPT_HEADERDATA, contextPointer)
        }
        if context.stop != nil || context.cancellation.operation != nil {
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
            cshim_setopt_long(h, CURLOPT_POST, 1)
            cshim_setopt_offset(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyBytes))
            // curl reads the body in place; this object owns it until the easy handle goes.
            cshim_setopt_pointer(h, CURLOPT_POSTFIELDS, body.baseAddress)
        }
    }

    /// The answer of a transfer that ended with `code`, or the error that
    /// ended it.
    func finish(_ code: CURLcode) throws(AppNorthError) -> HTTPResponse {
        if code != CURLE_OK {
            switch context.cancellation.reason ?? (context.ended == .engineStopped ? .stopped : nil) {
            case .operation: throw .cancelled("operation cancelled")
            case .client: throw .cancelled("request cancelled by appnorth_client_cancel")
            case .stopped: throw .cancelled("the transfer thread stopped before the request ended (its last handle was freed, or appnorth_shutdown)")
            case nil: break
            }
            switch context.ended {
            case .tooLarge: throw .tooLarge("response larger than \(maxResponseBytes) bytes")
            case .receiverStopped: throw .network("stream closed")
            case .idle: throw .network("stream idle for more than \(idleTimeoutMs) ms")
            case .engineStopped, nil: break
            }
            if context.stop?.isCancelled == true { throw .network("stream closed") }
            let length = strnlen(errorBuffer, Int(CURL_ERROR_SIZE))
            let detail = Text.escapingControls(String(decoding: UnsafeRawBufferPointer(start: errorBuffer, count: length), as: UTF8.self))
            let summary = String(cString: curl_easy_strerror(code))
            throw .network(detail.isEmpty ? summary : "\(summary): \(detail)")
        }
        var status = 0
        cshim_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var connects = 0
        cshim_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &connects)
        context.connectionsOpened = connects
        var version = 0
        cshim_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version)
        context.protocolName = HTTPResponse.protocolName(curlVersion: version)
        if context.onData == nil && CurlFeatures.keepsFields { context.headers = HTTPResponse.readFields(of: handle) }
        return context.response(status: status)
    }
}
