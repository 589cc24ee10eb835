/// The community API client: boards, ideas and (later) writes, for one API
/// URL, App ID and identity.
///
/// Thread-safe. Every call blocks its thread for at most the API request
/// timeout. The client does not persist failed requests: that is the
/// offline queue's job.
public final class AppNorthClient: Sendable {
    public let configuration: AppNorthClientConfiguration
    package let transport: HTTPTransport    /// gzip for uploads, and whether this client's server refused it.
    package let compression: UploadCompression

    /// Dispatch mode's queue of host callbacks (nil: the default mode,
    /// where library threads call the host directly). Handles made with
    /// this client (config, events) queue their callbacks on it too.
    package let dispatcher: CallbackDispatcher?
    /// The latest `appnorth.events` config value of this client's configs,
    /// which its events handles follow.
    package let eventSettings = EventSettingsFeed()
    /// "API_URL/v1/apps/APP_ID": every API path goes after it (`url`).
    private let urlPrefix: String

    public convenience init(configuration: AppNorthClientConfiguration) {
        self.init(configuration: configuration, dispatcher: nil)
    }

    /// A client whose log lines (and those of the handles made with it) go
    /// through `dispatcher` when one is given (dispatch mode).
    package init(configuration: AppNorthClientConfiguration, dispatcher: CallbackDispatcher?) {
        var configuration = configuration
        if let dispatcher { configuration.logger = configuration.logger.routed(through: dispatcher) }
        self.dispatcher = dispatcher
        self.configuration = configuration
        self.urlPrefix = "\(configuration.apiURL)/v1/apps/\(configuration.appID)"
        self.compression = UploadCompression(enabled: configuration.compressUploads)
        self.transport = HTTPTransport(timeouts: configuration.timeouts, logger: configuration.logger,
                                       trust: configuration.trust)
        RuntimeWarmUp.once {
            _ = standardHeaders() + [("", "")]
            RuntimeWarmUp.startPathTables()
        }
    }

    /// Ends every request in flight on this client at this moment with
    /// `.cancelled` (reads, writes, queue submits and flushes, config
    /// fetches and event uploads through it); later calls run normally.
    /// Callable from any thread; never blocks.
    public func cancelInFlight() {
        transport.cancelInFlight()
    }

    /// Runs a host callback (an operation's completion) as the client's
    /// mode says: queued for the host's next dispatch in dispatch mode
    /// (never dropped while the dispatcher is open), at once on this thread
    /// otherwise. Returns false, and `job` does not run, only when the
    /// dispatcher is closed (the client was freed).
    @discardableResult
    package func deliverCallback(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard let dispatcher else {
            job()
            return true
        }
        return dispatcher.post(job)
    }

    /// See `AppNorthClientConfiguration.scope`.
    public var scope: String { configuration.scope }

    /// The app's boards: the server's `{"boards":[...]}` object as text.
    public func listBoards() throws(AppNorthError) -> String {
        try perform(.listBoards)
    }

    /// One page of ideas: `{"ideas":[...],"next_cursor":...}` as text.
    public func listIdeas(_ query: IdeaQuery = IdeaQuery()) throws(AppNorthError) -> String {
        try perform(.listIdeas(query))
    }

    /// Runs `call` on this thread: what `start` does without blocking.
    package func perform(_ call: ClientCall) throws(AppNorthError) -> String {
        let prepared = try prepare(call)
        return try Self.objectText(send(prepared.method, prepared.path, body: prepared.body,
                                        extraHeaders: prepared.extraHeaders))
    }

    // MARK: Requests

    /// The URL of an API path under this app.
    func url(_ path: String) -> String {
        urlPrefix + path
    }

    /// Headers every API request carries: identity and JSON.
    func standardHeaders() -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let credential = configuration.credential {
            headers.append(("Authorization", "Bearer \(credential.token)"))
            headers.append(("AppNorth-User-Email", credential.email))
        }
        return headers
    }

    /// Sends a request and maps any non-2xx answer to its error.
    func send(_ method: HTTPRequest.Method, _ path: String, body: [UInt8]? = nil,
              extraHeaders: [(name: String, value: String)] = []) throws(AppNorthError) -> HTTPResponse {
        var headers = standardHeaders() + extraHeaders
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let request = HTTPRequest(method: method, url: url(path), headers: headers, body: body)
        let response: HTTPResponse
        do {
            response = try upload(request, as: .write)
        } catch {
            configuration.logger.log(.warning, "\(method.rawValue) \(path.split(separator: "?").first ?? ""): \(error.message)")
            throw error
        }
        if let error = response.error {
            configuration.logger.log(.warning, "\(method.rawValue) \(path.split(separator: "?").first ?? "") -> HTTP \(response.status)")
            throw error
        }
        return response
    }

    /// Performs a request whose body may go gzip-compressed. A 415 answer
    /// to a compressed body means the server does not take gzip: the same
    /// request (same idempotency key) goes again as it is, and this client
    /// compresses nothing from then on.
    /// `packed`: the body gzipped ahead (`compression.pack`).
    func upload(_ request: HTTPRequest, as body: UploadCompression.Body, packed: [UInt8]? = nil,
                cancel: CancellationToken? = nil) throws(AppNorthError) -> HTTPResponse {
        guard let packed = compression.compressed(request, as: body, packed: packed) else {
            return try transport.perform(request, cancel: cancel)
        }
        let response = try transport.perform(packed, cancel: cancel)
        guard response.status == 415 else { return response }
        if compression.noteRefused() {
            configuration.logger.log(.info, "the server answered 415 to a gzip body: "
                                     + "this client sends uncompressed bodies from now on")
        }
        return try transport.perform(request, cancel: cancel)
    }

    /// The body of a 2xx response, checked to be a JSON object, as text.
    /// Checked without building a tree (JSONValidator judges it as
    /// `JSON.parse` does), since the text is returned as it came.
    static func objectText(_ response: HTTPResponse) throws(AppNorthError) -> String {
        let top = try response.body.withUnsafeBufferPointer { bytes in
            Result { () throws(AppNorthError) in
                try JSONValidator.validate(bytes, what: "server response", integersAsReals: false)
            }
        }.get()
        guard top == .object else {
            throw .invalidJSON("server response is not a JSON object", position: 0)
        }
        return String(decoding: response.body, as: UTF8.self)
    }
}
