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
public final class AppNorthRemoteConfig: Sendable {
    public static let defaultTTLSeconds = 3600
    public static let defaultPollIntervalMilliseconds = 60_000
    public static let defaultStreamIdleTimeoutMilliseconds = 45_000

    public struct Options: Sendable {
        /// The data directory for the cached tier; nil: nothing is
        /// persisted and the cached tier never appears.
        public var dataDirectory: String?
        /// The bundled config file (a JSON object); nil: none.
        public var bundledPath: String?
        /// 1 to 31536000 seconds.
        public var ttlSeconds: Int
        /// TTLs and fetch times read this clock (waits between retries use
        /// real time).
        public var clock: any AppNorthClock
        /// How often the config is polled while the live stream is down.
        public var pollIntervalMilliseconds: Int
        /// Reconnect delays of the live stream, and of background fetches
        /// after a failure.
        public var reconnectBackoff: Backoff
        /// A stream silent for this long is dropped and reconnected (the
        /// server sends keepalives every 15 s).
        public var streamIdleTimeoutMilliseconds: Int
        /// nil: the client's logger.
        public var logger: Logger?

        public init(dataDirectory: String? = nil, bundledPath: String? = nil,
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
    public init(client: AppNorthClient, options: Options = Options()) throws(AppNorthError) {
        engine = try ConfigEngine(client: client, options: options)
    }

    /// Why the bundled file was skipped at open, or nil.
    public var bundledError: AppNorthError? { engine.bundledError }

    /// Reads and checks a bundled config file: `.storage` when it cannot be
    /// read, `.invalidJSON` when it is not a UTF-8 JSON object, `.tooLarge`
    /// past 16 MiB; each message names the file.
    public static func checkBundledFile(path: String) throws(AppNorthError) {
        _ = try BundledConfig.load(path: path)
    }

    deinit { engine.close() }

    // MARK: Reading (memory only; a stale config starts a background fetch)

    /// A string value, or `defaultValue` when the key is absent or not a
    /// string.
    public func string(_ key: String, default defaultValue: String?) -> String? {
        if case .string(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// An integer value (a JSON number without fraction or exponent), or
    /// `defaultValue`.
    public func integer(_ key: String, default defaultValue: Int64) -> Int64 {
        if case .integer(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// A number (integer or real) as a double, or `defaultValue`.
    public func double(_ key: String, default defaultValue: Double) -> Double {
        switch engine.current().document.value(key) {
        case .integer(let value)?: return Double(value)
        case .real(let value)?: return value
        default: return defaultValue
        }
    }

    /// A boolean value (JSON true or false), or `defaultValue`.
    public func bool(_ key: String, default defaultValue: Bool) -> Bool {
        if case .bool(let value)? = engine.current().document.value(key) { return value }
        return defaultValue
    }

    /// The exact JSON text of any value (object, array, string, number,
    /// true, false or null), or `defaultValue` when the key is absent.
    public func json(_ key: String, default defaultValue: String?) -> String? {
        engine.current().document.valueText(key) ?? defaultValue
    }

    /// The whole effective config object, exactly as served or bundled;
    /// `{}` for the default tier.
    public func snapshot() -> String { engine.current().document.text }

    /// The effective config and its metadata.
    public var resolved: ResolvedConfig { engine.current() }

    /// The tier and fetch time (wall milliseconds; 0 for bundled and
    /// default) of the effective config.
    public var source: (tier: ConfigTier, fetchedWallMilliseconds: Int64) {
        let resolved = engine.current()
        return (resolved.tier, resolved.fetchedWallMilliseconds)
    }

    /// The outcome of the latest exchange with the server.
    public var lastFetchStatus: ConfigFetchStatus { engine.lastStatus }

    // MARK: Fetching and live updates

    /// Fetches now on the calling thread (conditional GET) and applies the
    /// result; listeners for a change run on this thread before it returns,
    /// unless another thread is delivering at that moment (it then delivers
    /// this change right after). Throws the fetch's error; the effective
    /// config is then unchanged. Blocks for at most the resource timeout.
    public func refresh() throws(AppNorthError) { try engine.refresh() }

    /// Starts live updates on the background thread. Idempotent.
    public func startLiveUpdates() throws(AppNorthError) { try engine.startLive() }

    /// Stops live updates and joins the background thread (unless called on
    /// that thread, from a listener: it then ends once the listener
    /// returns). Idempotent.
    public func stopLiveUpdates() { engine.stopLive() }

    public var isLive: Bool { engine.isLive }

    // MARK: Listeners

    /// Registers a listener; returns its token. See `ListenerRegistry` for
    /// the threading rules: callbacks run one at a time, in order, with no
    /// library lock held, on the background thread or on a thread calling
    /// `refresh()`.
    public func addListener(_ listener: @escaping @Sendable (ConfigChange) -> Void) throws(AppNorthError) -> Int64 {
        try engine.addListener(listener)
    }

    /// Unregisters a listener, waiting for its callback if it is running on
    /// another thread. Throws `.invalidArgument` for an unknown token.
    public func removeListener(_ token: Int64) throws(AppNorthError) {
        try engine.removeListener(token)
    }

    /// Stops everything: no listener is called after this returns (except
    /// the one it is called from), the background thread is joined, and the
    /// data directory may be opened again. Reads keep working from memory.
    /// Idempotent.
    public func close() { engine.close() }
}

// MARK: - Engine

/// The state and threads behind one AppNorthRemoteConfig. Kept apart from
/// the public object so that the background thread can hold it while the
/// public object's deinit (the host's free) stops that thread.
final class ConfigEngine: Sendable {
    let endpoint: ConfigEndpoint
    let clock: any AppNorthClock
    let logger: Logger
    let freshness: ConfigFreshness
    let backoff: Backoff
    let pollIntervalMilliseconds: Int
    let streamIdleTimeoutMilliseconds: Int
    let cache: ConfigCache?
    let claimKey: String?
    /// Why the bundled file was skipped at open, if it was.
    let bundledError: AppNorthError?
    let listeners: ListenerRegistry<ConfigChange>
    /// Waits between attempts use real time, whatever the TTL clock.
    let timer = SystemClock()
    let closed = Atomic<Bool>(false)

    struct State: Sendable {
        var current: ResolvedConfig
        var lastStatus = ConfigFetchStatus.none
        /// Persist order of fetched records.
        var sequence: UInt64 = 0
        var streamConnected = false
        /// A background fetch was asked for and has not finished.
        var revalidating = false
        var failures = 0
        var retryNotBefore: UInt64 = 0
        /// A 429 or 503 with Retry-After: no background request (stream,
        /// poll, fetch) starts before this (on `timer`).
        var serverNotBefore: UInt64 = 0
    }

    struct Worker: Sendable {
        let thread: BackgroundThread
        let cancel: StreamCancellation
    }

    struct Control: Sendable {
        var live = false
        var fetchWanted = false
        var worker: Worker?
        /// The worker's body has returned or is about to.
        var workerExiting = false
    }

    let state: Lock<State>
    let control = Lock(Control())

    init(client: AppNorthClient, options: AppNorthRemoteConfig.Options) throws(AppNorthError) {
        guard (1...31_536_000).contains(options.ttlSeconds) else {
            throw .invalidArgument("config TTL must be 1 to 31536000 seconds")
        }
        guard (10...86_400_000).contains(options.pollIntervalMilliseconds) else {
            throw .invalidArgument("config poll interval must be 10 to 86400000 ms")
        }
        guard options.streamIdleTimeoutMilliseconds >= 1000 else {
            throw .invalidArgument("config stream idle timeout must be at least 1000 ms")
        }
        clock = options.clock
        logger = Self.logger(options.logger, of: client)
        listeners = Self.listenerRegistry(of: client)
        endpoint = ConfigEndpoint(client: client, logger: logger)
        freshness = ConfigFreshness(ttlSeconds: options.ttlSeconds)
        backoff = options.reconnectBackoff
        pollIntervalMilliseconds = options.pollIntervalMilliseconds
        streamIdleTimeoutMilliseconds = options.streamIdleTimeoutMilliseconds

        // A bundled file that cannot be used is reported and skipped: the
        // config falls back to the cached tier or the caller's defaults.
        var bundled: ConfigDocument?
        var bundledProblem: AppNorthError?
        if let path = options.bundledPath {
            do {
                bundled = try BundledConfig.load(path: path)
            } catch {
                bundledProblem = error
                logger.log(.error, "bundled config ignored: \(error.message)")
            }
        }
        bundledError = bundledProblem

        var cache: ConfigCache?
        var claimKey: String?
        if let path = options.dataDirectory {
            let directory = try DataDirectory(path: path)
            let key = ConfigCacheClaims.key(directory: directory, appID: client.configuration.appID)
            try ConfigCacheClaims.claim(key)
            do {
                cache = try ConfigCache(directory: directory, appID: client.configuration.appID, logger: logger)
            } catch {
                ConfigCacheClaims.release(key)
                throw error
            }
            claimKey = key
        }
        self.cache = cache
        self.claimKey = claimKey
        let initial = ResolvedConfig.initial(cached: cache?.load(), bundled: bundled, clock: options.clock)
        state = Lock(State(current: initial))
        logger.log(.info, "config opened from the \(initial.tier) tier")
    }

    var isClosed: Bool { closed.load(ordering: .acquiring) }

    // MARK: Reads

    /// The effective config. When it is past its TTL (and no live stream is
    /// connected, no background fetch is running and no retry delay is
    /// pending), asks the background thread for a fetch, without waiting.
    func current() -> ResolvedConfig {
        let now = clock.monotonicNanoseconds()
        let retryClock = timer.monotonicNanoseconds()
        let (resolved, revalidate) = state.withLock { s -> (ResolvedConfig, Bool) in
            let resolved = s.current
            if s.streamConnected || s.revalidating || retryClock < max(s.retryNotBefore, s.serverNotBefore)
                || freshness.isFresh(fetchedMonotonic: resolved.fetchedMonotonic, nowMonotonic: now) {
                return (resolved, false)
            }
            s.revalidating = true
            return (resolved, true)
        }
        if revalidate && !isClosed {
            control.withLock { $0.fetchWanted = true }
            if !ensureWorker() { finishRevalidation(failed: true) }
        }
        return resolved
    }

    var lastStatus: ConfigFetchStatus { state.withLock { $0.lastStatus } }

    var isLive: Bool { control.withLock { $0.live } }

    // MARK: Applying what the server sent

    /// Applies a fetch or stream outcome, persists it, and delivers the
    /// listener event (if the content changed) on this thread.
    func apply(_ outcome: ConfigFetchOutcome) {
        let wall = clock.wallMilliseconds()
        let mono = Int64(clamping: clock.monotonicNanoseconds())
        var tierBefore = ConfigTier.remote, tierAfter = ConfigTier.remote
        var changedCount = 0
        let persist = state.withLock { s -> (ConfigCache.Record, UInt64)? in
            tierBefore = s.current.tier
            tierAfter = tierBefore
            s.lastStatus = ConfigFetchStatus(error: nil, wallMilliseconds: wall)
            s.failures = 0
            s.retryNotBefore = 0
            switch outcome {
            case .notModified(let etag):
                // Only sent when we asked with the ETag of what we hold.
                guard s.current.tier >= .cached else { return nil }
                s.current = s.current.confirmed(wallMilliseconds: wall, monotonic: mono, etag: etag)
            case .document(let served, let etag, let version):
                let changed = served.changedKeys(from: s.current.document)
                changedCount = changed.count
                // Equal content keeps the text we hold, so that nothing a
                // reader sees changes without a listener call.
                let document = changed.isEmpty ? s.current.document : served
                s.current = ResolvedConfig(document: document, tier: .remote, etag: etag, version: version,
                                           fetchedWallMilliseconds: wall, fetchedMonotonic: mono)
                if !changed.isEmpty {
                    // Posted under the state lock, so events keep the order of changes.
                    listeners.post(ConfigChange(config: document.text, changedKeys: changed, tier: .remote))
                }
            }
            tierAfter = s.current.tier
            s.sequence += 1
            return (ConfigCache.Record(document: s.current.document, etag: s.current.etag, version: s.current.version,
                                       fetchedWallMilliseconds: wall), s.sequence)
        }
        if let persist { cache?.save(persist.0, sequence: persist.1) }
        if tierAfter != tierBefore { logger.log(.info, "config: tier changed from \(tierBefore) to \(tierAfter)") }
        switch outcome {
        case .notModified: logger.log(.debug, "config: not modified (HTTP 304)")
        case .document: logger.log(.debug, "config: fetched; \(changedCount) top-level key(s) changed")
        }
        listeners.deliverPending()
    }

    func recordFailure(_ error: AppNorthError, _ what: String) {
        let wall = clock.wallMilliseconds()
        state.withLock { $0.lastStatus = ConfigFetchStatus(error: error, wallMilliseconds: wall) }
        logger.log(.warning, "config \(what) failed: \(error.message)")
    }

    private func conditionalETag() -> String? {
        state.withLock { $0.current.tier >= .cached ? $0.current.etag : nil }
    }

    // MARK: Refresh (caller's thread)

    func refresh() throws(AppNorthError) {
        guard !isClosed else { throw .wrongState("the config is closed") }
        let outcome: ConfigFetchOutcome
        do {
            outcome = try endpoint.fetch(etag: conditionalETag(), cancel: nil, refused: noteRetryAfter)
        } catch {
            recordFailure(error, "refresh")
            throw error
        }
        apply(outcome)
    }

    // MARK: Background fetches

    /// One conditional GET on the background thread. Returns false when it
    /// failed.
    @discardableResult
    func backgroundFetch(_ worker: BackgroundThread, _ cancel: StreamCancellation, what: String) -> Bool {
        do {
            let outcome = try endpoint.fetch(etag: conditionalETag(), cancel: cancel, refused: noteRetryAfter)
            if worker.isStopping { return true }
            apply(outcome)
            return true
        } catch {
            if worker.isStopping { return true }
            recordFailure(error, what)
            return false
        }
    }

    /// Records the wait a 429 or 503 asks for (capped at
    /// `RetryAfter.defaultCapMilliseconds`); the background thread starts
    /// no request before it has passed. A later answer replaces it.
    func noteRetryAfter(_ response: HTTPResponse) {
        guard let wait = RetryAfter.milliseconds(for: response, nowWallMs: timer.wallMilliseconds(),
                                                 capMs: RetryAfter.defaultCapMilliseconds) else { return }
        let until = timer.monotonicNanoseconds().addingSaturating(UInt64(clamping: wait).multipliedSaturating(by: 1_000_000))
        state.withLock { $0.serverNotBefore = until }
        logger.log(.info, "config: the server asked to retry after \(wait) ms (HTTP \(response.status))")
    }

    var serverNotBefore: UInt64 { state.withLock { $0.serverNotBefore } }

    /// Sleeps until a server's Retry-After has passed. False when the
    /// thread must end.
    private func waitForServer(_ thread: BackgroundThread) -> Bool {
        while !thread.isStopping {
            let until = serverNotBefore
            let now = timer.monotonicNanoseconds()
            if now >= until { return true }
            if !thread.sleep(milliseconds: Int(clamping: (until - now) / 1_000_000).addingSaturating(1)) { return false }
        }
        return false
    }

    func finishRevalidation(failed: Bool) {
        let now = timer.monotonicNanoseconds()
        state.withLock { s in
            s.revalidating = false
            if failed {
                s.failures += 1
                let delay = backoff.delay(attempt: s.failures, random: Random.unit())
                s.retryNotBefore = now.addingSaturating(UInt64(clamping: delay).multipliedSaturating(by: 1_000_000))
            }
        }
    }

    // MARK: The background thread

    /// Makes sure the background thread runs and has seen the latest
    /// requests. Returns false if no thread could be started.
    @discardableResult
    func ensureWorker() -> Bool {
        var finished: BackgroundThread?
        var failure: AppNorthError?
        let ok = control.withLock { c -> Bool in
            if isClosed { return false }
            if let worker = c.worker, !c.workerExiting, !worker.thread.isStopping {
                worker.thread.wake()
                return true
            }
            finished = c.worker?.thread
            let cancel = StreamCancellation()
            do throws(AppNorthError) {
                let thread = try BackgroundThread(name: "appnorth-config") { [self] thread in
                    self.run(thread, cancel)
                }
                c.worker = Worker(thread: thread, cancel: cancel)
                c.workerExiting = false
                return true
            } catch {
                c.worker = nil
                failure = error
                return false
            }
        }
        finished?.stop()  // joins a thread whose body has returned
        if let failure { logger.log(.error, "config: \(failure.message)") }
        return ok
    }

    func startLive() throws(AppNorthError) {
        guard !isClosed else { throw .wrongState("the config is closed") }
        control.withLock { $0.live = true }
        guard ensureWorker() else {
            control.withLock { $0.live = false }
            throw .internal("cannot start the config thread")
        }
    }

    func stopLive() {
        let worker = control.withLock { c -> Worker? in
            c.live = false
            c.fetchWanted = false
            let worker = c.worker
            c.worker = nil
            c.workerExiting = false
            return worker
        }
        guard let worker else { return }
        worker.cancel.cancel()
        worker.thread.stop()
        state.withLock { s in
            s.streamConnected = false
            s.revalidating = false
        }
    }

    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        listeners.close()
        stopLive()
        if let claimKey { ConfigCacheClaims.release(claimKey) }
    }

    /// The background thread's body: one-shot fetches while live updates
    /// are off, the stream/poll loop while they are on. It returns when it
    /// has nothing left to do or when stopped.
    private func run(_ thread: BackgroundThread, _ cancel: StreamCancellation) {
        var attempt = 0
        while !thread.isStopping {
            let (live, fetch) = control.withLock { c -> (Bool, Bool) in
                let fetch = c.fetchWanted
                c.fetchWanted = false
                if !c.live && !fetch { c.workerExiting = true }
                return (c.live, fetch)
            }
            if live {
                // A stream (re)connection answers a pending revalidation too.
                if fetch { finishRevalidation(failed: false) }
                if !waitForServer(thread) { return }
                let outcome = runStream(thread, cancel)
                if thread.isStopping { return }
                attempt = outcome == .connected ? 1 : attempt + 1
                let delay = backoff.delay(attempt: attempt, random: Random.unit())
                logger.log(.debug, "config stream ended (\(outcome)); reconnecting in \(delay) ms")
                if !waitBeforeReconnect(thread, cancel, delayMilliseconds: delay,
                                        pollNow: outcome == .refused) { return }
            } else if fetch {
                if !waitForServer(thread) { return }
                let ok = backgroundFetch(thread, cancel, what: "background fetch")
                finishRevalidation(failed: !ok)
            } else {
                return
            }
        }
    }

    enum StreamOutcome: Sendable, CustomStringConvertible {
        /// The stream was open (something arrived) and then ended.
        case connected
        /// The server answered with an error status: polling takes over.
        case refused
        /// No connection, or it ended before anything arrived.
        case failed

        var description: String {
            switch self {
            case .connected: return "connected, then closed"
            case .refused: return "refused"
            case .failed: return "failed"
            }
        }
    }

    /// The longest line or event a config stream may send.
    static let maxStreamEventBytes = 16 << 20

    /// Runs one stream connection until it ends.
    private func runStream(_ thread: BackgroundThread, _ cancel: StreamCancellation) -> StreamOutcome {
        // Last-Event-ID only for what this object received from the server,
        // so that the first connection confirms a cached copy.
        let lastEventID = state.withLock { s -> String? in
            s.current.tier == .remote ? s.current.version.map { String($0) } : nil
        }
        var parser = ServerSentEventParser(maxEventBytes: Self.maxStreamEventBytes)
        var connected = false
        var overLimit = false
        let request = endpoint.streamRequest(lastEventID: lastEventID)
        defer { state.withLock { $0.streamConnected = false } }
        do {
            let response = try endpoint.transport.stream(request, idleTimeoutMs: streamIdleTimeoutMilliseconds,
                                                         cancel: cancel, logger: logger) { [self] chunk in
                if !connected {
                    connected = true
                    state.withLock { $0.streamConnected = true }
                    logger.log(.debug, "config stream connected")
                }
                for event in parser.feed(chunk) {
                    if thread.isStopping { return false }
                    handle(event)
                }
                if parser.oversizeEvents > 0 {
                    // One endless line would otherwise hold the connection
                    // forever while the status still said OK.
                    overLimit = true
                    recordFailure(.tooLarge("config stream sent a line or event over \(Self.maxStreamEventBytes) bytes"),
                                  "stream")
                    return false
                }
                return !thread.isStopping
            }
            if response.isSuccess { return connected ? .connected : .failed }
            noteRetryAfter(response)
            let error = AppNorthError.fromHTTP(status: response.status, message: AppNorthClient.serverMessage(response))
            recordFailure(error, "stream")
            return .refused
        } catch {
            if thread.isStopping || overLimit { return .failed }
            if connected { return .connected }
            recordFailure(error, "stream")
            return .failed
        }
    }

    private func handle(_ event: ServerSentEvent) {
        guard event.type == "config" || event.type == "message" else { return }
        do {
            let (document, version) = try ConfigEndpoint.parsePayload(event.data, what: "config stream event")
            apply(.document(document, etag: version.map { "\"\($0)\"" }, version: version))
        } catch {
            recordFailure(error, "stream event")
        }
    }

    /// Waits `delayMilliseconds` before the next stream attempt, polling
    /// every poll interval meanwhile (at once if `pollNow`), and at once
    /// when a read asks for a fetch; a server's Retry-After (noted by the
    /// stream or a poll) holds back both the polls and the reconnect.
    /// Returns false when the thread must end.
    private func waitBeforeReconnect(_ thread: BackgroundThread, _ cancel: StreamCancellation,
                                     delayMilliseconds: Int, pollNow: Bool) -> Bool {
        let start = timer.monotonicNanoseconds()
        let deadline = start.addingSaturating(UInt64(clamping: delayMilliseconds).multipliedSaturating(by: 1_000_000))
        let interval = UInt64(clamping: pollIntervalMilliseconds).multipliedSaturating(by: 1_000_000)
        var nextPoll = pollNow ? start : start.addingSaturating(interval)
        while !thread.isStopping {
            let (live, asked) = control.withLock { c -> (Bool, Bool) in
                let asked = c.fetchWanted
                c.fetchWanted = false
                return (c.live, asked)
            }
            if !live { return true }
            var now = timer.monotonicNanoseconds()
            var notBefore = serverNotBefore
            if asked { nextPoll = now }
            if now >= max(nextPoll, notBefore) && max(nextPoll, notBefore) < max(deadline, notBefore) {
                let ok = backgroundFetch(thread, cancel, what: "poll")
                if asked { finishRevalidation(failed: !ok) }
                now = timer.monotonicNanoseconds()
                nextPoll = now.addingSaturating(interval)
                notBefore = serverNotBefore
            } else if asked {
                finishRevalidation(failed: false)
            }
            let end = max(deadline, notBefore)
            if now >= end { return !thread.isStopping }
            let wake = min(end, max(nextPoll, notBefore))
            let ms = Int(clamping: (wake > now ? wake - now : 0) / 1_000_000).addingSaturating(1)
            if !thread.sleep(milliseconds: ms) { return false }
        }
        return false
    }
}

/// The bundled tier: a JSON object file the host ships (the seed's
/// appdna-config.json), read once at open.
enum BundledConfig {
    static let maxBytes = 16 << 20

    static func load(path: String) throws(AppNorthError) -> ConfigDocument {
        guard !path.isEmpty else { throw .invalidArgument("bundled config path is empty") }
        let bytes = try readFile(path)
        return try ConfigDocument(bytes: bytes, what: "bundled config file \(path)")
    }

    private static func readFile(_ path: String) throws(AppNorthError) -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw .storage("cannot read bundled config file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n > 0 { bytes += chunk[0..<n] }
            if bytes.count > maxBytes {
                throw .tooLarge("bundled config file \(path) is larger than \(maxBytes) bytes")
            }
            if n < chunk.count {
                if ferror(file) != 0 {
                    throw .storage("cannot read bundled config file \(path): \(String(cString: strerror(errno)))")
                }
                break
            }
        }
        return bytes
    }
}
