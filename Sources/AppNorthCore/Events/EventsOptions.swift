/// Event queue settings. The defaults are the seed's numbers.
package struct AppNorthEventsOptions: Sendable {
    /// Automatic flush every 30 s ...
    package var flushIntervalMilliseconds = 30_000
    /// ... or as soon as 20 events are waiting, whichever comes first.
    package var batchThreshold = 20
    /// At most 10,000 events and 5 MB queued; past either, the oldest are
    /// dropped and counted.
    package var maxQueuedEvents = 10_000
    package var maxQueuedBytes = 5 * 1024 * 1024
    /// One event larger than this (its upload JSON) is refused by `track`.
    package var maxEventBytes = 64 * 1024
    /// 3 retries after 1 s, 2 s, 4 s, with jitter.
    package var retry = Backoff(retries: 3)
    /// A server's Retry-After is honoured up to this.
    package var retryAfterCapMilliseconds = RetryAfter.defaultCapMilliseconds
    /// Uploads pause after this many consecutive failures.
    package var breakerThreshold = CircuitBreaker.defaultThreshold
    /// When true, nothing is stored before the host grants consent; when
    /// false (the default), events are queued until consent is revoked.
    package var requireConsent = false
    package var networkType = NetworkType.unknown
    /// Automatic sessions: a new one after 30 min without an event and
    /// at most every 24 h (`SessionPolicy`; 0 turns either off).
    package var session = SessionPolicy()
    /// The share of installs that track, 0 to 1 (default 1: all). Per
    /// install, by its anonymous id (`EventSettingsOwner`); the config key
    /// `appnorth.events` may override it.
    package var sampleRate = 1.0
    /// Whether the handle follows the `appnorth.events` key of the configs
    /// made with its client (default true; false: only these options count).
    package var followsRemoteSettings = true
    /// The host's filter hook (`BeforeSendFilter`); none by default.
    package var beforeSend: BeforeSendHook?

    package init() {}

    package func validate() throws(AppNorthError) {
        func check(_ ok: Bool, _ what: String) throws(AppNorthError) { if !ok { throw .invalidArgument(what) } }
        try check(EventSettings.flushIntervalRange.contains(flushIntervalMilliseconds), "flush interval must be 10 ms to 24 h")
        try check(EventSettings.batchThresholdRange.contains(batchThreshold), "batch threshold must be 1 to 10000")
        try check(EventSettings.validSampleRate(sampleRate), "sample rate must be a number from 0 to 1")
        try check((1...10_000_000).contains(maxQueuedEvents), "max queued events must be 1 to 10000000")
        try check((1024...(1 << 30)).contains(maxQueuedBytes), "max queued bytes must be 1 KiB to 1 GiB")
        try check((256...(16 << 20)).contains(maxEventBytes), "max event bytes must be 256 B to 16 MiB")
        try check((1...600_000).contains(retry.baseMilliseconds), "retry base must be 1 ms to 600 s")
        try check((0...10).contains(retry.retries), "retries must be 0 to 10")
        try check((1...100).contains(breakerThreshold), "breaker threshold must be 1 to 100")
        try session.validate()
    }
}

/// The analytics consent choice, persisted.
public enum ConsentState: Int32, Sendable {
    case unknown = -1, revoked = 0, granted = 1

    var name: String {
        switch self {
        case .unknown: return "unknown"
        case .revoked: return "revoked"
        case .granted: return "granted"
        }
    }
}
