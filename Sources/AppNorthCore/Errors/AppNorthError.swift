/// Every failure the core reports. One taxonomy for Swift hosts and for the
/// C layer, which maps each case to one `APPNORTH_E_*` status.
///
/// Messages never contain credentials, tokens or identity values.
public enum AppNorthError: Error, Sendable, Equatable {
    /// No HTTP response arrived: refused or dropped connection, DNS, TLS,
    /// timeout. The only error that makes the offline queue keep a write.
    case network(String)
    /// A required argument was missing, empty or out of range.
    case invalidArgument(String)
    /// Text that must be JSON did not parse or had the wrong shape.
    /// `position` is the byte offset jansson stopped at (`JSONValidator`:
    /// where the problem starts), or -1.
    case invalidJSON(String, position: Int)
    /// A string was not valid UTF-8.
    case invalidUTF8(String)
    /// A value was larger than the library or the server accepts.
    case tooLarge(String, httpStatus: Int = 0)
    /// The server refused the content (HTTP 400 or 422).
    case validation(String, httpStatus: Int)
    /// The credential was missing or refused (HTTP 401 or 403).
    case authentication(String, httpStatus: Int)
    /// HTTP 404.
    case notFound(String)
    /// HTTP 409, for instance an idempotency key reused with another payload.
    case conflict(String)
    /// HTTP 5xx.
    case server(String, httpStatus: Int)
    /// Any other unexpected HTTP status.
    case http(String, httpStatus: Int)
    /// A write had to be queued, but the offline queue is at its limit;
    /// nothing was added.
    case queueFull(String)
    /// SQLite, the file system or host storage failed.
    case storage(String)
    /// The call is not allowed in the current state (for instance, closed).
    case wrongState(String)
    /// The operation did not finish within the time the caller allowed.
    case timeout(String)
    /// `cancelInFlight()` (appnorth_client_cancel) ended the call.
    case cancelled(String)
    /// A bug or an impossible condition.
    case `internal`(String)

    /// The human-readable message.
    public var message: String {
        switch self {
        case .network(let m), .invalidArgument(let m), .invalidUTF8(let m),
             .notFound(let m), .conflict(let m), .queueFull(let m), .storage(let m),
             .wrongState(let m), .timeout(let m), .cancelled(let m), .internal(let m):
            return m
        case .invalidJSON(let m, _), .tooLarge(let m, _), .validation(let m, _),
             .authentication(let m, _), .server(let m, _), .http(let m, _):
            return m
        }
    }

    /// The HTTP status the server answered with, or 0 when none did.
    public var httpStatus: Int {
        switch self {
        case .tooLarge(_, let s), .validation(_, let s), .authentication(_, let s),
             .server(_, let s), .http(_, let s):
            return s
        case .notFound: return 404
        case .conflict: return 409
        default: return 0
        }
    }
}
