/// The config's data-source status (issue #40 item 4), as a value: the
/// engine feeds it how each exchange with the config endpoints ended and
/// whether live updates run, under its state lock; `handle` answers
/// whether what a status listener sees changed. Pure: the wall time comes
/// in as an argument (ConfigStatusTests drives it with plain numbers).
///
/// The state is the outcome of the latest of these events:
/// - initializing: nothing has ended yet since the open (or since
///   live updates were started again after a stop);
/// - valid: the server answered with a config or a 304;
/// - interrupted: the server answered with an error status or an invalid
///   payload, or a connected stream ended; the library retries;
/// - offline: no answer (connection refused or dropped, DNS, TLS, timeout);
///   the library retries;
/// - off: the host stopped live updates (`stopLive`).
/// No answer stops the data source for good: 401 and 403 hold back the
/// config's thread for `authenticationHoldMilliseconds` instead
/// (docs/config.md, "What each answer does").
package struct ConfigStatus: Sendable, Equatable {
    /// The C header's APPNORTH_CONFIG_STATE_* values.
    package enum State: Int32, Sendable, CustomStringConvertible {
        case initializing = 0, valid = 1, interrupted = 2, offline = 3, off = 4

        package var description: String {
            switch self {
            case .initializing: return "initializing"
            case .valid: return "valid"
            case .interrupted: return "interrupted"
            case .offline: return "offline"
            case .off: return "off"
            }
        }
    }

    package enum Event: Sendable, Equatable {
        /// A config or a 304 arrived.
        case answered
        /// An exchange failed (a host's cancel changes no state).
        case failed(AppNorthError)
        /// A stream that had connected ended; the reconnect follows.
        case streamDropped
        case liveStarted, liveStopped
    }

    /// How long a 401 or 403 holds back every request of the config's
    /// thread: LaunchDarkly's extended backoff (5 minutes), in place of
    /// stopping the data source for good.
    package static let authenticationHoldMilliseconds = 300_000

    package private(set) var state = State.initializing
    /// When `state` was entered, wall milliseconds (the open, for the
    /// first initializing).
    package private(set) var sinceWallMilliseconds: Int64
    /// The latest failure, kept after a recovery; nil before the first.
    package private(set) var lastError: AppNorthError?
    /// When it happened, wall milliseconds; 0 before the first.
    package private(set) var lastErrorWallMilliseconds: Int64 = 0
    /// The latest exchange's outcome (appnorth_config_last_fetch_status).
    package private(set) var lastExchange = ConfigFetchStatus.none

    package init(openedWallMilliseconds: Int64) {
        sinceWallMilliseconds = openedWallMilliseconds
    }

    /// Applies an event; true when a listener's view changed: the state,
    /// or the last error's code or HTTP status (a repeated failure of the
    /// same kind only moves its time and message, and fires nothing).
    @discardableResult
    package mutating func handle(_ event: Event, wallMilliseconds: Int64) -> Bool {
        let before = (state, lastError.map(Self.kind))
        switch event {
        case .answered:
            lastExchange = ConfigFetchStatus(error: nil, wallMilliseconds: wallMilliseconds)
            enter(.valid, wallMilliseconds)
        case .failed(let error):
            lastExchange = ConfigFetchStatus(error: error, wallMilliseconds: wallMilliseconds)
            if case .cancelled = error { break }
            lastError = error
            lastErrorWallMilliseconds = wallMilliseconds
            enter(Self.state(after: error), wallMilliseconds)
        case .streamDropped:
            if state == .valid { enter(.interrupted, wallMilliseconds) }
        case .liveStarted:
            if state == .off { enter(.initializing, wallMilliseconds) }
        case .liveStopped:
            enter(.off, wallMilliseconds)
        }
        let after = (state, lastError.map(Self.kind))
        return before.0 != after.0 || before.1?.code != after.1?.code || before.1?.http != after.1?.http
    }

    private mutating func enter(_ next: State, _ wallMilliseconds: Int64) {
        guard next != state else { return }
        state = next
        sinceWallMilliseconds = wallMilliseconds
    }

    /// No answer at all is offline; any answer that is not a config is an
    /// interruption.
    static func state(after error: AppNorthError) -> State {
        switch error {
        case .network, .timeout: return .offline
        default: return .interrupted
        }
    }

    /// An error's kind (its case) and HTTP status, without the message.
    private static func kind(_ error: AppNorthError) -> (code: Int, http: Int) {
        let code: Int
        switch error {
        case .network: code = 1
        case .invalidArgument: code = 2
        case .invalidJSON: code = 3
        case .invalidUTF8: code = 4
        case .tooLarge: code = 5
        case .validation: code = 6
        case .authentication: code = 7
        case .notFound: code = 8
        case .conflict: code = 9
        case .server: code = 10
        case .http: code = 11
        case .queueFull: code = 12
        case .storage: code = 13
        case .wrongState: code = 14
        case .timeout: code = 15
        case .cancelled: code = 16
        case .internal: code = 17
        }
        return (code, error.httpStatus)
    }

    /// Whether this failure holds back the config's thread longer than its
    /// backoff: a refused credential (401, 403) is not retried for
    /// `authenticationHoldMilliseconds`.
    static func holdBackMilliseconds(after error: AppNorthError) -> Int? {
        if case .authentication = error { return authenticationHoldMilliseconds }
        return nil
    }
}
