/// Community writes. Each carries an Idempotency-Key (the caller's or a
/// generated one), so a retried write is applied once by the server. None
/// of these calls queue anything.
extension AppNorthClient {
    /// Submits an idea, comment or feedback; returns the server's answer.
    @discardableResult
    public func submit(_ write: CommunityWrite, idempotencyKey key: String? = nil) throws(AppNorthError) -> String {
        try perform(.submit(write, idempotencyKey: key))
    }

    @discardableResult
    public func submitIdea(boardID: String, title: String, body: String = "",
                           idempotencyKey: String? = nil) throws(AppNorthError) -> String {
        try submit(.idea(boardID: boardID, title: title, body: body), idempotencyKey: idempotencyKey)
    }

    @discardableResult
    public func submitComment(handle ideaID: String, body: String,
                              idempotencyKey: String? = nil) throws(AppNorthError) -> String {
        try submit(.comment(ideaID: ideaID, body: body), idempotencyKey: idempotencyKey)
    }

    @discardableResult
    public func submitFeedback(_ feedback: AppNorthFeedback, idempotencyKey: String? = nil) throws(AppNorthError) -> String {
        try submit(.feedback(feedback), idempotencyKey: idempotencyKey)
    }

    /// Votes for an idea. Never queued.
    @discardableResult
    public func vote(ideaID: String, idempotencyKey key: String? = nil) throws(AppNorthError) -> String {
        try perform(.vote(ideaID: ideaID, idempotencyKey: key))
    }

    /// Sends a chat message. Never queued, never cached.
    @discardableResult
    public func sendChatMessage(_ body: String, idempotencyKey key: String? = nil) throws(AppNorthError) -> String {
        try perform(.sendChatMessage(body, idempotencyKey: key))
    }

    public func listChatMessages() throws(AppNorthError) -> String {
        try perform(.listChatMessages)
    }

    public func listComments(ideaID: String) throws(AppNorthError) -> String {
        try perform(.listComments(ideaID: ideaID))
    }

    /// POSTs a write body with its idempotency key; returns the 2xx body.
    func post(_ path: String, body: [UInt8], key: String) throws(AppNorthError) -> String {
        let response = try send(.post, path, body: body, extraHeaders: [("Idempotency-Key", key)])
        return try Self.objectText(response)
    }
}
