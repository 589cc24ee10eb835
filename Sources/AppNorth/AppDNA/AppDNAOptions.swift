import AppNorthCore
import Foundation

/// Which AppNorth API `AppDNA.configure` talks to.
///
/// `.production` is the hosted API. `.custom(apiURL:)` names any other
/// server: a staging deployment, or the local dev server
/// (`devserver/appnorth_devserver.py`). `AppDNA.useDevServer(apiURL:)`
/// redirects every environment, `.production` included, for one process.
public struct AppDNAEnvironment: Sendable, Hashable, CustomStringConvertible {
    /// The API's base URL, without the `/v1/apps/...` path.
    public let apiURL: String

    /// The hosted AppNorth API.
    public static let production = AppDNAEnvironment(apiURL: "https://api.appnorth.example")

    /// Any other server. The URL is checked by `configure` (http or https,
    /// a host, no query or fragment).
    public static func custom(apiURL: String) -> AppDNAEnvironment { AppDNAEnvironment(apiURL: apiURL) }

    public var description: String { apiURL }
}

/// Settings for `AppDNA.configure`. The defaults are the seed page's
/// numbers; every time is in seconds, as in the seed.
public struct AppDNAOptions: Sendable {
    public static let defaultConfigTTL: TimeInterval = 3600
    public static let defaultFlushInterval: TimeInterval = 30
    public static let defaultBatchSize = 20

    /// How long a fetched config counts as fresh: 1 s to 1 year, default
    /// 3600 s. Past it the next read serves the stale config and fetches a
    /// fresh one in the background.
    public var configTTL: TimeInterval
    /// Automatic event flush interval: 0.01 s to 24 h, default 30 s.
    public var flushInterval: TimeInterval
    /// Events waiting that start a flush at once: 1 to 10000, default 20.
    public var batchSize: Int
    /// Where config cache, event queue, consent and identity live. nil: a
    /// folder per server and API key under the data root
    /// (`<Application Support>/AppDNA/<server>/<apiKey>`), so that switching
    /// accounts never sends one account's queued events to another.
    public var dataDirectory: String?
    /// The bundled fallback config, a JSON object file. nil: the main
    /// bundle's `appdna-config.json`, when it has one.
    public var bundledConfigPath: String?
    /// Keep a live stream to the server so that published configs arrive
    /// at once (`AppDNA.configUpdated`); false: fetch only when the TTL ran
    /// out.
    public var liveUpdates: Bool
    /// Where AppDNA's and the core's log lines go: warnings and errors on
    /// standard error by default.
    public var logger: Logger

    public init(configTTL: TimeInterval = AppDNAOptions.defaultConfigTTL,
                flushInterval: TimeInterval = AppDNAOptions.defaultFlushInterval,
                batchSize: Int = AppDNAOptions.defaultBatchSize,
                dataDirectory: String? = nil,
                bundledConfigPath: String? = nil,
                liveUpdates: Bool = true,
                logger: Logger = AppDNAOptions.standardErrorLogger) {
        self.configTTL = configTTL
        self.flushInterval = flushInterval
        self.batchSize = batchSize
        self.dataDirectory = dataDirectory
        self.bundledConfigPath = bundledConfigPath
        self.liveUpdates = liveUpdates
        self.logger = logger
    }

    /// Warnings and errors to standard error, as `AppDNA <LEVEL>: message`.
    public static let standardErrorLogger = Logger(minimum: .warning) { level, message in
        FileHandle.standardError.write(Data("AppDNA \(level): \(message)\n".utf8))
    }

    // MARK: Mapping onto the core

    /// The config TTL in whole seconds (rounded up), refused outside 1 s to 1 year.
    func configTTLSeconds() throws(AppNorthError) -> Int {
        let most = Limits.ttlSeconds.upperBound
        guard configTTL.isFinite, configTTL > 0, configTTL <= TimeInterval(most) else {
            throw .invalidArgument("configTTL must be more than 0 and at most \(most) seconds")
        }
        return max(1, Int(configTTL.rounded(.up)))
    }

    /// The core's event options: the flush interval and batch size from
    /// here, every other number the seed's default.
    func eventsOptions() throws(AppNorthError) -> AppNorthEventsOptions {
        var events = AppNorthEventsOptions()
        events.flushIntervalMilliseconds = try milliseconds(flushInterval, in: 0.01...86_400, what: "flushInterval")
        events.batchThreshold = batchSize
        try events.validate()
        return events
    }

    /// The bundled config to read: the one given, or the main bundle's.
    func bundledConfig() -> String? {
        bundledConfigPath ?? Bundle.main.path(forResource: "appdna-config", ofType: "json")
    }
}

/// Seconds from a host, as the core's milliseconds: refused when not
/// finite or outside `range` (in seconds).
func milliseconds(_ seconds: TimeInterval, in range: ClosedRange<TimeInterval>, what: String) throws(AppNorthError) -> Int {
    guard seconds.isFinite, range.contains(seconds) else {
        throw .invalidArgument("\(what) must be \(range.lowerBound) to \(range.upperBound) seconds")
    }
    return Int((seconds * 1000).rounded())
}
