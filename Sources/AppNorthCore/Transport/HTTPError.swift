/// The one mapping from an HTTP answer to the core's error taxonomy: the
/// status picks the `AppNorthError` case, the body's
/// `{"error":{"code","message"}}` gives its message. Every caller (the
/// client's calls, the event uploads, the config fetch and stream) reads
/// non-2xx answers through `HTTPResponse.error`; what each then does about
/// the status (the events' retry/split/bisect table in `UploadStatusPolicy`,
/// the config's backoff) is that caller's policy over this mapping.
/// Retry-After is read in one place too: `RetryAfter`.
extension HTTPResponse {
    /// The error this answer means; nil for a 2xx answer.
    package var error: AppNorthError? {
        isSuccess ? nil : AppNorthError.fromHTTP(status: status, message: serverMessage)
    }

    /// The most of a server's error code and message that an error or a
    /// log line carries (Unicode scalars, before escaping: at most 4 times
    /// as many bytes after it).
    package static let maxCodeExcerpt = 64
    package static let maxMessageExcerpt = 512

    /// "HTTP 409 conflict: idempotency key reused" from an
    /// `{"error":{"code","message"}}` body, or "HTTP 409" when the body is
    /// not in that shape. Server text is a bounded excerpt (Text.excerpt),
    /// escaped (Text.escapingControls): a 16 MiB message costs no more than
    /// a short one in every error and log line that carries it.
    package var serverMessage: String {
        if let parsed = try? JSON.parse(body), let error = parsed["error"] {
            let code = Text.escapingControls(Text.excerpt(error["code"]?.stringValue ?? "error", Self.maxCodeExcerpt))
            let message = Text.escapingControls(Text.excerpt(error["message"]?.stringValue ?? "", Self.maxMessageExcerpt))
            return "HTTP \(status) \(code)" + (message.isEmpty ? "" : ": \(message)")
        }
        return "HTTP \(status)"
    }
}

extension AppNorthError {
    /// Maps an HTTP error status to its case. `message` is the server's
    /// error message when it sent one.
    package static func fromHTTP(status: Int, message: String) -> AppNorthError {
        switch status {
        case 400, 422: return .validation(message, httpStatus: status)
        case 401, 403: return .authentication(message, httpStatus: status)
        case 404: return .notFound(message)
        case 409: return .conflict(message)
        case 413: return .tooLarge(message, httpStatus: status)
        case 500...599: return .server(message, httpStatus: status)
        default: return .http(message, httpStatus: status)
        }
    }
}
