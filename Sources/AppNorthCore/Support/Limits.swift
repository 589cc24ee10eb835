/// The bounds of the options and arguments that both the core and the C
/// layer check: one owner for each number (include/appnorth.h states them
/// too). A bound only one component checks lives with that component
/// (`AppNorthFeedback.maxTextCharacters`, `EventsOptions.validate`, ...).
package enum Limits {
    /// TTL of the read cache and of the remote config cache, in seconds
    /// (1 s to 365 days).
    package static let ttlSeconds = 1...31_536_000
    /// The remote config's poll interval, in ms (10 ms to 24 h).
    package static let pollIntervalMilliseconds = 10...86_400_000
    /// The remote config's reconnect backoff ceiling, in ms (1 h).
    package static let backoffMaxMilliseconds = 3_600_000
    /// Entries an offline queue may hold.
    package static let queueEntries = 1...10_000
    /// A client's API request and resource download timeouts, in ms.
    package static let timeoutMilliseconds = 1...600_000
    /// Jitter shares as the C API takes them, in percent (0 = off).
    package static let jitterPercent: ClosedRange<Int32> = 0...100
    /// Hosts one client may reach over cleartext HTTP.
    package static let cleartextHosts = 16
    /// The name of a built-in SQLite queue or cache storage, in bytes.
    package static let storageNameBytes = 1...64

    /// "1 to 10000": a range as the error messages spell it.
    package static func spelled(_ range: ClosedRange<Int>) -> String { "\(range.lowerBound) to \(range.upperBound)" }
}
