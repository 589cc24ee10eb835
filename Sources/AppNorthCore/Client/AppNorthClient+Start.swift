/// The client's calls as values, for their non-blocking forms: each is
/// checked and made into one request up front (so bad input fails the
/// start at once, as it fails the blocking call before anything is sent),
/// then sent on the process's transfer thread (through `AsyncTransfers`). The answer
/// goes through the same checks as the blocking call's: the same errors,
/// the same text.
package enum ClientCall: Sendable {
    case listBoards
    case listIdeas(IdeaQuery)
    case listComments(ideaID: String)
    case listChatMessages
    case submit(CommunityWrite, idempotencyKey: String?)
    case vote(ideaID: String, idempotencyKey: String?)
    case sendChatMessage(String, idempotencyKey: String?)
}

/// A `ClientCall` checked and ready to send.
struct PreparedCall: Sendable {
    let method: HTTPRequest.Method
    let path: String
    let body: [UInt8]?
    let extraHeaders: [(name: String, value: String)]
}

extension AppNorthClient {
    /// Checks `call` (what the blocking call checks before sending) and
    /// builds its request.
    func prepare(_ call: ClientCall) throws(AppNorthError) -> PreparedCall {
        func write(_ path: String, _ body: [UInt8], _ key: String?) throws(AppNorthError) -> PreparedCall {
            PreparedCall(method: .post, path: path, body: body, extraHeaders: [("Idempotency-Key", try idempotencyKey(key))])
        }
        switch call {
        case .listBoards:
            return PreparedCall(method: .get, path: "/boards", body: nil, extraHeaders: [])
        case .listIdeas(let query):
            try query.validate()
            return PreparedCall(method: .get, path: "/ideas" + query.queryString, body: nil, extraHeaders: [])
        case .listComments(let ideaID):
            try requireID(ideaID, "idea_id")
            return PreparedCall(method: .get, path: "/ideas/\(Text.pathSegment(ideaID))/comments", body: nil, extraHeaders: [])
        case .listChatMessages:
            return PreparedCall(method: .get, path: "/chat/messages", body: nil, extraHeaders: [])
        case .submit(let community, let key):
            try community.validate()
            return try write(community.path, community.requestBody(), key)
        case .vote(let ideaID, let key):
            try requireID(ideaID, "idea_id")
            return try write("/ideas/\(Text.pathSegment(ideaID))/votes", Array("{}".utf8), key)
        case .sendChatMessage(let text, let key):
            try requireText(text, "chat message", max: 4000)
            let object = JSON.object()
            object.set("body", .string(text))
            return try write("/chat/messages", Array(object.serialized().utf8), key)
        }
    }

    /// Starts `call` and returns at once. `completion` runs exactly once,
    /// on the transfer thread, with the blocking call's answer (the JSON
    /// object's text) or error; `.cancelled` once `operation` is cancelled
    /// or on `cancelInFlight()`. Throws, without calling `completion`, for
    /// bad input or when nothing could be started.
    package func start(_ call: ClientCall, operation: CancellationToken,
                      completion: @escaping @Sendable (Result<String, AppNorthError>) -> Void) throws(AppNorthError) {
        let prepared = try prepare(call)
        try sendAsync(prepared, operation: operation) { result in
            completion(result.flatMap { response in
                Result { () throws(AppNorthError) -> String in try Self.objectText(response) }
            })
        }
    }

    /// `send` without blocking: the same headers, gzip and 415 fallback
    /// (`upload`), logging and status mapping.
    private func sendAsync(_ call: PreparedCall, operation: CancellationToken,
                           completion: @escaping @Sendable (Result<HTTPResponse, AppNorthError>) -> Void) throws(AppNorthError) {
        var headers = standardHeaders() + call.extraHeaders
        if call.body != nil { headers.append(("Content-Type", "application/json")) }
        let request = HTTPRequest(method: call.method, url: url(call.path), headers: headers, body: call.body)
        let logger = configuration.logger
        let finish: @Sendable (Result<HTTPResponse, AppNorthError>) -> Void = { result in
            // Named only for a warning: no string work on the way to success.
            var what: String { "\(call.method.rawValue) \(call.path.split(separator: "?").first ?? "")" }
            switch result {
            case .failure(let error):
                logger.log(.warning, "\(what): \(error.message)")
                completion(.failure(error))
            case .success(let response):
                guard let error = response.error else { return completion(result) }
                logger.log(.warning, "\(what) -> HTTP \(response.status)")
                completion(.failure(error))
            }
        }
        guard let packed = compression.compressed(request, as: .write) else {
            return try AsyncTransfers.send(request, with: transport, operation: operation, completion: finish)
        }
        try AsyncTransfers.send(packed, with: transport, operation: operation) { [self] result in
            guard case .success(let response) = result, response.status == 415 else { return finish(result) }
            if compression.noteRefused() {
                logger.log(.info, "the server answered 415 to a gzip body: this client sends uncompressed bodies from now on")
            }
            do throws(AppNorthError) {
                try AsyncTransfers.send(request, with: transport, operation: operation, completion: finish)
            } catch {
                finish(.failure(error))
            }
        }
    }
}
