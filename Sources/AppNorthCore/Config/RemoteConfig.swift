import Glibc
import Synchronization

/// Remote config resolved over three tiers, with a TTL cache,
/// stale-while-revalidate, live updates and change listeners.
///
/// - Resolution, highest first: remote (fetched or streamed by this
///   object), cached (persisted in the data directory by an earlier fetch),
///   bundled (the host's JSON file), and otherwise nothing, where every
///   getter returns the caller's default. The effective config is one
///   whole document of the highest tier available; tiers are not merged
///   key by key.
/// - TTL (default 3600 s): a fresh config is served as it is. Once it is
///   older than the TTL, the next read starts a background fetch (a
///   conditional GET with If-None-Match) and keeps serving the stale value
///   until a new one arrives; a 304 refreshes the fetch time. A config that
///   was never fetched (bundled or default) counts as expired. After a
///   failed background fetch the next one waits for the reconnect backoff.
///   While the live stream is connected the config counts as fresh.
/// - Live updates (`startLiveUpdates`): a Server-Sent Events stream
///   delivers each new version; it reconnects after errors with
///   exponential backoff and jitter, and while it is down the config is
///   polled every poll interval (at once when the server answered the
///   stream with an error status).
/// - Reads never touch the disk or the network on the calling thread: they
///   read an immutable in-memory document.
/// - Listeners fire on every change of the effective config's content,
///   never for a fetch that brings identical content.
///
/// Thread-safe. One background thread per object, started by
/// `startLiveUpdates()` or on demand for a background fetch, ended and
/// joined by `stopLiveUpdates()` and `close()`.
package final class AppNorthRemoteConfig: Sendable {
    package static let defaultTTLSeconds = 3600
    package static let defaultPollIntervalMilliseconds = 60_000
    package static let defaultStreamIdleTimeoutMilliseconds = 45_000

    package struct Options: Sendable {
        /// The data directory for the cached tier; nil: nothing is
        /// persisted and the cached tier never appears.
        package var dataDirectory: String?
        /// The bundled config file (a JSON object); nil: none.
        package var bundledPath: String?
        /// 1 to 31536000 seconds.
        package var ttlSeconds: Int
        /// TTLs and fetch times read this clock (waits between retries use
        /// real time).
        package var clock: any AppNorthClock
        /// How often the config is polled while the live stream is down.
        package var pollIntervalMilliseconds: Int
        /// Reconnect delays of the live stream, and of background fetches
        /// after a failure.
        package var reconnectBackoff: Backoff
        /// A stream silent for this long is dropped and reconnected (the
        /// server sends keepalives every 15 s).
        package var streamIdleTimeoutMilliseconds: Int
        /// nil: the client's logger.
        package var logger: Logger?

        package init(dataDirectory: String? = nil, bundledPath: String? = nil,
                    ttlSeconds: Int = AppNorthRemoteConfig.defaultTTLSeconds,
                    clock: any AppNorthClock = SystemClock(),
                    pollIntervalMilliseconds: Int = AppNorthRemoteConfig.defaultPollIntervalMilliseconds,
                    reconnectBackoff: Backoff = .default,
                    streamIdleTimeoutMilliseconds: Int = AppNorthRemoteConfig.defaultStreamIdleTimeoutMilliseconds,
                    logger: Logger? = nil) {
            self.dataDirectory = dataDirectory
            self.bundledPath = bundledPath
            self.ttlSeconds = ttlSeconds
            self.clock = clock
            self.pollIntervalMilliseconds = pollIntervalMilliseconds
            self.reconnectBackoff = reconnectBackoff
            self.streamIdleTimeoutMilliseconds = streamIdleTimeoutMilliseconds
            self.logger = logger
        }
    }

    let engine: ConfigEngine

    /// Opens the config: reads the bundled file (if given) and the cached
    /// copy (if a data directory is given), and resolves. No network
    /// traffic happens here.
    ///
    /// A bundled file that is missing or invalid does not stop the open:
    /// it is logged, kept in `bundledError`, and the config falls back to
    /// the cached tier or the caller's defaults (`checkBundledFile` reports
    /// the problem up front). Throws `.storage` when the data directory is
    /// unusable, `.wrongState` when a config for the same App ID is already
    /// open on the same data directory. An unreadable cached copy is
    /// discarded (logged).
    package init(client: AppNorthClient, options: Options = Options()) throws(AppNorthError) {
        engine = try ConfigEngine(client: client, options: options)
    }

    /// Why the bundled file was skipped at open, or nil.
    package var bundledError: AppNorthError? { engine.bundledError }

    /// Reads and checks a bundled config file: `.storage` when it cannot be
    /// read, `.invalidJSON` when it is not a UTF-8 JSON object, `.tooLarge`
    /// past 16 MiB; each message names the file.
    package static func checkBundledFile(path: String) throws(AppNorthError) {
        _ = try BundledConfig.load(path: path)
    }

    deinit { engine.close() }

    // MARK: Reading (memory only; a stale config starts a background fetch)

    /// A string value, or `defaultValue` when the key is absent or not a
    /// string.
    package func string(_ key: String, default defaultValue: String?) -> String? {
        if case .string(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// An integer value (a JSON number without fraction or exponent), or
    /// `defaultValue`.
    package func integer(_ key: String, default defaultValue: Int64) -> Int64 {
        if case .integer(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// A number (integer or real) as a double, or `defaultValue`.
    package func double(_ key: String, default defaultValue: Double) -> Double {
        switch engine.current().document.value(key) {
        case .integer(let value)?: return Double(value)
        case .real(let value)?: return value
        default: return defaultValue
        }
    }

    /// A boolean value (JSON true or false), or `defaultValue`.
    package func bool(_ key: String, default defaultValue: Bool) -> Bool {
        if case .bool(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// The exact JSON text of any value (object, array, string, number,
    /// true, false or null), or `defaultValue` when the key is absent.
    package func json(_ key: String, default defaultValue: String?) -> String? {
        engine.current().document.valueText(key) ?? defaultValue
    }

    /// The whole effective config object, exactly as served or bundled;
    /// `{}` for the default tier.
    package func snapshot() -> String { engine.current().document.text }

    /// The effective config and its metadata.
    package var resolved: ResolvedConfig { engine.current() }

    /// The tier and fetch time (wall milliseconds; 0 for bundled and
    /// default) of the effective config.
    package var source: (tier: ConfigTier, fetchedWallMilliseconds: Int64) {
        let resolved = engine.current()
        return (resolved.tier, resolved.fetchedWallMilliseconds)
    }

    /// The outcome of the latest exchange with the server.
    package var lastFetchStatus: ConfigFetchStatus { engine.lastStatus }

    /// The data-source status: its state, since when, and the last error
    /// (kept after a recovery). See `ConfigStatus`.
    package var status: ConfigStatus { engine.status }

    // MARK: Fetching and live updates

    /// Fetches now on the calling thread (conditional GET) and applies the
    /// result; listeners for a change run on this thread before it returns,
    /// unless another thread is delivering at that moment (it then delivers
    /// this change right after). Throws the fetch's error; the effective
    /// config is then unchanged. Blocks for at most the resource timeout.
    package func refresh() throws(AppNorthError) { try engine.refresh() }

    /// Starts live updates on the background thread. Idempotent.
    package func startLiveUpdates() throws(AppNorthError) { try engine.startLive() }

    /// Stops live updates and joins the background thread (unless called on
    /// that thread, from a listener: it then ends once the listener
    /// returns). Idempotent.
    package func stopLiveUpdates() { engine.stopLive() }

    package var isLive: Bool { engine.isLive }

    // MARK: Listeners

    /// Registers a status listener; returns its token. Called when the
    /// state changes, or the last error's kind or HTTP status does, on the
    /// threads (and in dispatch mode, the dispatch) of the config
    /// listeners; a new listener is not called for the current status.
    package func addStatusListener(_ listener: @escaping @Sendable (ConfigStatus) -> Void) throws(AppNorthError) -> Int64 {
        try engine.addStatusListener(listener)
    }

    /// Unregisters a status listener, waiting for its callback if it runs
    /// on another thread. Throws `.invalidArgument` for an unknown token.
    package func removeStatusListener(_ token: Int64) throws(AppNorthError) {
        try engine.removeStatusListener(token)
    }

    /// Registers a listener; returns its token. See `ListenerRegistry` for
    /// the threading rules: callbacks run one at a time, in order, with no
    /// library lock held, on the background thread or on a thread calling
    /// `refresh()`.
    package func addListener(_ listener: @escaping @Sendable (ConfigChange) -> Void) throws(AppNorthError) -> Int64 {
        try engine.addListener(listener)
    }

    /// Unregisters a listener, waiting for its callback if it is running on
    /// another thread. Throws `.invalidArgument` for an unknown token.
    package func removeListener(_ token: Int64) throws(AppNorthError) {
        try engine.removeListener(token)
    }

    /// Stops everything: no listener is called after this returns (except
    /// the one it is called from), the background thread is joined, and the
    /// data directory may be opened again. Reads keep working from memory.
    /// Idempotent.
    package func close() { engine.close() }

    /// Cancels the stream's or fetch's transfer in flight without waiting
    /// for the thread (a process-wide stop tells the thread to end and
    /// waits for every thread at once).
    package func cancelStream() { engine.cancelTransfer() }
}
