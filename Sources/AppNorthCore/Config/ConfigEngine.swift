import Synchronization

// MARK: - Engine

/// The state and threads behind one AppNorthRemoteConfig. Kept apart from
/// the public object so that the background thread can hold it while the
/// public object's deinit (the host's free) stops that thread.
final class ConfigEngine: Sendable {
    let endpoint: ConfigEndpoint
    let clock: any AppNorthClock
    let logger: Logger
    let freshness: ConfigFreshness
    let streamIdleTimeoutMilliseconds: Int
    let cache: ConfigCache?
    let claimKey: String?
    /// Why the bundled file was skipped at open, if it was.
    let bundledError: AppNorthError?
    let listeners: ListenerRegistry<ConfigChange>
    /// Status listeners: the same delivery rules as `listeners`.
    let statusListeners: ListenerRegistry<ConfigStatus>
    /// The client's `appnorth.events` feed, which this config's documents update.
    let eventSettings: EventSettingsFeed
    /// Waits between attempts use real time, whatever the TTL clock.
    let timer = SystemClock()
    let closed = Atomic<Bool>(false)

    struct State: Sendable {
        var current: ResolvedConfig
        /// The data-source status, with the latest exchange's outcome.
        var status: ConfigStatus
        /// Persist order of fetched records.
        var sequence: UInt64 = 0
        /// What the background thread does next; its times are on `timer`.
        var worker: ConfigWorkerState
        /// The background thread, while one runs.
        var thread: WorkerThread?
    }

    struct WorkerThread: Sendable {
        let thread: BackgroundThread
        let cancel: CancellationToken
    }

    let state: Lock<State>

    init(client: AppNorthClient, options: AppNorthRemoteConfig.Options) throws(AppNorthError) {
        guard Limits.ttlSeconds.contains(options.ttlSeconds) else {
            throw .invalidArgument("config TTL must be \(Limits.spelled(Limits.ttlSeconds)) seconds")
        }
        guard Limits.pollIntervalMilliseconds.contains(options.pollIntervalMilliseconds) else {
            throw .invalidArgument("config poll interval must be \(Limits.spelled(Limits.pollIntervalMilliseconds)) ms")
        }
        guard options.streamIdleTimeoutMilliseconds >= 1000 else {
            throw .invalidArgument("config stream idle timeout must be at least 1000 ms")
        }
        clock = options.clock
        logger = Self.logger(options.logger, of: client)
        listeners = Self.listenerRegistry(of: client)
        statusListeners = Self.statusListenerRegistry(of: client)
        eventSettings = client.eventSettings
        endpoint = ConfigEndpoint(client: client, logger: logger)
        freshness = ConfigFreshness(ttlSeconds: options.ttlSeconds)
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
        let worker = ConfigWorkerState(backoff: options.reconnectBackoff,
                                       pollIntervalMilliseconds: options.pollIntervalMilliseconds)
        state = Lock(State(current: initial, status: ConfigStatus(openedWallMilliseconds: options.clock.wallMilliseconds()),
                           worker: worker), level: LockClass.configState)
        // The events handles of this client follow the key from the tier it
        // opened on: offline, the cached copy switches them as the server did.
        eventSettings.post(initial.document)
        eventSettings.deliver()
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
            if !s.worker.mayRevalidate(now: retryClock)
                || freshness.isFresh(fetchedMonotonic: resolved.fetchedMonotonic, nowMonotonic: now) {
                return (resolved, false)
            }
            s.worker.handle(.readFoundStale, now: retryClock)
            return (resolved, true)
        }
        if revalidate && !isClosed && !ensureWorker() { send(.fetchNotStarted) }
        return resolved
    }

    var lastStatus: ConfigFetchStatus { state.withLock { $0.status.lastExchange } }

    var status: ConfigStatus { state.withLock { $0.status } }

    /// Feeds the status an event, with the state lock held; a change a
    /// listener sees is posted under it, so events keep their order.
    func noteStatus(_ event: ConfigStatus.Event, in s: inout State, wallMilliseconds: Int64) {
        if s.status.handle(event, wallMilliseconds: wallMilliseconds) { statusListeners.post(s.status) }
    }

    /// `noteStatus` outside the lock, then the delivery.
    func noteStatus(_ event: ConfigStatus.Event) {
        let wall = clock.wallMilliseconds()
        state.withLock { noteStatus(event, in: &$0, wallMilliseconds: wall) }
        statusListeners.deliverPending()
    }

    var isLive: Bool { state.withLock { $0.worker.live } }

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
            noteStatus(.answered, in: &s, wallMilliseconds: wall)
            s.worker.handle(.serverAnswered, now: 0)
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
                    eventSettings.post(document)
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
        // The events handles first: a host that sees the listener call
        // finds them already on the new settings.
        eventSettings.deliver()
        listeners.deliverPending()
        statusListeners.deliverPending()
    }

    /// Records a failed exchange in the status; a refused credential also
    /// holds back the config's thread (`ConfigStatus.holdBackMilliseconds`).
    func recordFailure(_ error: AppNorthError, _ what: String) {
        noteStatus(.failed(error))
        logger.log(.warning, "config \(what) failed: \(error.message)")
        if let hold = ConfigStatus.holdBackMilliseconds(after: error) {
            send(.serverAskedToWait(milliseconds: hold))
            logger.log(.info, "config: the credential was refused (HTTP \(error.httpStatus)); no request for \(hold) ms")
        }
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
    func backgroundFetch(_ worker: BackgroundThread, _ cancel: CancellationToken, what: String) -> Bool {
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
        send(.serverAskedToWait(milliseconds: wait))
        logger.log(.info, "config: the server asked to retry after \(wait) ms (HTTP \(response.status))")
    }
}

extension LockClass {
    /// `ConfigEngine.state`: a config handle's resolved values and its worker's schedule.
    static let configState = LockClass(rank: 35, "ConfigEngine.state")
}
