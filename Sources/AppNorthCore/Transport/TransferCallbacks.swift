import CCurl

/// Why the library ended a transfer before curl finished it (curl then
/// reports an error code; `EasyTransfer.finish` turns the two into the
/// error). A cancel is not one of them: it is read from the transfer's
/// `Cancellation`, which outranks every reason here.
enum TransferEnd: Equatable {
    /// The answer outgrew the response limit.
    case tooLarge
    /// A stream's receiver (`onData`) refused more.
    case receiverStopped
    /// A stream was silent past its idle timeout.
    case idle
    /// The transfer engine stopped while it held the transfer
    /// (`Cancellation.Reason.stopped`); set on the engine thread before `done`.
    case engineStopped
}

/// State shared with curl's C callbacks for one transfer.
final class TransferContext {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var status = 0
    let limit: Int
    let onData: (([UInt8]) -> Bool)?
    /// The requester's own stop (a config stream's, an upload attempt's
    /// that a consent revocation ends): it ends the transfer as a closed
    /// stream (`.network`), not as a cancel.
    var stop: CancellationToken?
    /// Its operation's token (a non-blocking call's, or the calling
    /// thread's `OperationScope`) and its client's cancel since the
    /// transfer began: either ends it with `.cancelled`.
    var cancellation = Cancellation()
    var connectionsOpened = 0
    var protocolName = ""
    /// Why the library ended it before curl finished it, if it did: one
    /// value, the first reason set wins (`end(_:)`).
    private(set) var ended: TransferEnd?
    /// When bytes last arrived (monotonic ns), for the stream idle timeout.
    var lastActivityNs: UInt64 = 0

    init(limit: Int, onData: (([UInt8]) -> Bool)?) {
        self.limit = limit
        self.onData = onData
    }

    /// Notes why the library ends it; the first reason stays.
    func end(_ why: TransferEnd) {
        if ended == nil { ended = why }
    }

    /// Its stop, its operation or its client ended it.
    var isCancelled: Bool { stop?.isCancelled == true || cancellation.isCancelled }

    var isStreamingSuccess: Bool { onData != nil && (200...299).contains(status) }

    /// The answer of a transfer that ended with `status` (`EasyTransfer.finish`).
    func response(status: Int) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: body,
                     connectionsOpened: connectionsOpened, protocolName: protocolName)
    }
}

/// What a curl write callback received: its transfer's context and the
/// bytes, with the transfer's activity noted (nil: nothing arrived).
private func received(_ data: UnsafeMutablePointer<CChar>?, _ length: Int,
                      _ user: UnsafeMutableRawPointer?) -> (TransferContext, UnsafeRawBufferPointer)? {
    guard let data, length > 0 else { return nil }
    let context = Unmanaged<TransferContext>.fromOpaque(user!).takeUnretainedValue()
    context.lastActivityNs = monotonicNow()
    return (context, UnsafeRawBufferPointer(start: data, count: length))
}

func transferWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                       _ user: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let (context, chunk) = received(data, length, user) else { return length }
    if context.isStreamingSuccess, let onData = context.onData {
        if !onData(Array(chunk)) {
            context.end(.receiverStopped)
            return 0
        }
        return length
    }
    if context.body.count + length > context.limit {
        context.end(.tooLarge)
        return 0
    }
    context.body.append(contentsOf: chunk)
    return length
}

func transferWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                         _ user: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let (context, line) = received(data, length, user) else { return length }
    HTTPHeaderLine.record(line, into: &context.headers, status: &context.status)
    return length
}

func transferProgress(_ user: UnsafeMutableRawPointer?, _ dlTotal: curl_off_t, _ dlNow: curl_off_t,
                              _ ulTotal: curl_off_t, _ ulNow: curl_off_t) -> Int32 {
    let context = Unmanaged<TransferContext>.fromOpaque(user!).takeUnretainedValue()
    return context.isCancelled ? 1 : 0
}

func monotonicNow() -> UInt64 { SystemClock().monotonicNanoseconds() }
