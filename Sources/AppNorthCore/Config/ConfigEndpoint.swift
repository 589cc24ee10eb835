/// What a config fetch brought.
enum ConfigFetchOutcome: Sendable {
    /// A document (200 or a stream event).
    case document(ConfigDocument, etag: String?, version: Int64?)
    /// 304: the document we hold is current.
    case notModified(etag: String?)
}

/// The two config endpoints of the protocol: `GET .../config` (ETag,
/// If-None-Match, 304) and the Server-Sent Events stream
/// `GET .../config/stream`.
struct ConfigEndpoint: Sendable {
    let client: AppNorthClient
    /// The config's logger: its requests are traced there.
    let logger: Logger

    var transport: HTTPTransport { client.transport }

    func fetchRequest(etag: String?) -> HTTPRequest {
        var headers = client.standardHeaders()
        if let etag = EntityTag.validated(etag) { headers.append(("If-None-Match", etag)) }
        // Config documents are resources: the resource download timeout.
        return HTTPRequest(method: .get, url: client.url("/config"), headers: headers, kind: .resource)
    }

    func streamRequest(lastEventID: String?) -> HTTPRequest {
        var headers = client.standardHeaders().filter { $0.name != "Accept" }
        headers.append(("Accept", "text/event-stream"))
        headers.append(("Cache-Control", "no-cache"))
        if let lastEventID { headers.append(("Last-Event-ID", lastEventID)) }
        return HTTPRequest(method: .get, url: client.url("/config/stream"), headers: headers, kind: .resource)
    }

    /// A conditional GET. With `cancel`, the transfer can be ended at once
    /// from another thread (background fetches, so that stopping never waits
    /// for a request timeout); without it, it runs on the keep-alive pool.
    /// `refused` sees an error answer (its status and headers, for a
    /// Retry-After) before it is thrown as an error.
    func fetch(etag: String?, cancel: CancellationToken?,
               refused: (HTTPResponse) -> Void = { _ in }) throws(AppNorthError) -> ConfigFetchOutcome {
        let request = fetchRequest(etag: etag)
        let response: HTTPResponse
        var body: [UInt8] = []
        if let cancel {
            let limit = transport.maxResponseBytes
            var overflow = false
            do {
                response = try transport.stream(request, idleTimeoutMs: transport.timeouts.resourceDownloadMilliseconds,
                                                cancel: cancel, logger: logger) { chunk in
                    if body.count + chunk.count > limit { overflow = true; return false }
                    body += chunk
                    return true
                }
            } catch {
                if overflow { throw .tooLarge("config response larger than \(limit) bytes") }
                throw error
            }
            if !response.isSuccess { body = response.body }
        } else {
            response = try transport.perform(request, logger: logger)
            body = response.body
        }
        if response.status == 304 { return .notModified(etag: EntityTag.validated(response.header("ETag"))) }
        if let error = response.error {
            refused(response)
            throw error
        }
        let (document, version) = try Self.parsePayload(body, what: "config response")
        let etag = EntityTag.validated(response.header("ETag")) ?? version.map { "\"\($0)\"" }
        return .document(document, etag: etag, version: version)
    }

    /// Reads `{"version": N, "config": {...}}` (a GET body or a stream
    /// event's data), keeping the config's exact text.
    static func parsePayload(_ bytes: [UInt8], what: String) throws(AppNorthError) -> (ConfigDocument, Int64?) {
        let root = try JSON.parse(bytes, what: what)
        guard root.kind == .object, let config = root["config"] else {
            throw .invalidJSON("\(what) has no \"config\" member", position: 0)
        }
        guard config.kind == .object else {
            throw .invalidJSON("\(what): \"config\" is not a JSON object", position: 0)
        }
        guard let span = JSONText.objectMembers(bytes)?.last(where: { $0.key == "config" })?.value else {
            throw .invalidJSON("\(what) has no \"config\" member", position: 0)
        }
        let document = try ConfigDocument(bytes: Array(bytes[span]), what: "\(what) config")
        return (document, root["version"]?.intValue)
    }
}

extension AppNorthRemoteConfig {
    /// The client the config fetches with (its dispatch mode is the config's).
    package var client: AppNorthClient { engine.endpoint.client }
}
