import AppNorthCore
import Foundation
import Synchronization

/// The seed page's AppDNA API: a convenience singleton for Swift apps over
/// the handle-based core (`AppNorthClient`, `AppNorthEvents`,
/// `AppNorthRemoteConfig`), which itself has no singleton.
///
/// ```swift
/// AppDNA.configure(
///     apiKey: "adn_live_xxx",
///     environment: .production,
///     options: AppDNAOptions(configTTL: 1800) // 30 minutes
/// )
/// AppDNA.track("purchase", properties: ["price": 9.99])
/// let banner = AppDNA.config.string("banner", default: "Welcome")
/// ```
///
/// Threads: every call returns at once. `configure`, `track` and
/// `setConsent` are applied in call order on AppDNA's own serial queue,
/// which does the disk work (opening SQLite, inserting events); the network
/// runs on the core's threads. So no call blocks the caller, the main
/// thread or Swift's cooperative pool on the network or the disk. Config
/// reads are memory only. Failures of those calls are logged through
/// `AppDNAOptions.logger` and kept in `lastError`; `ready()` reports why a
/// configure failed.
///
/// How `configure` maps onto the core:
/// - `apiKey` is the App ID (`/v1/apps/<apiKey>/...`); 1 to 128 characters
///   of `A-Z a-z 0-9 . _ -`.
/// - `environment` gives the API URL (`AppDNA.useDevServer` overrides it).
/// - `options.configTTL` is the config's TTL, `flushInterval` and
///   `batchSize` the event queue's; every other number is the seed's.
/// - One data directory holds config cache, event queue, consent and
///   identity: `options.dataDirectory`, or a folder per server and key.
public enum AppDNA {
    /// Posted on `NotificationCenter.default` when the config that the
    /// getters read changes: a published config arriving over the live
    /// stream, a fetch bringing different values, and once after
    /// `configure` when a cached or bundled config is in place. `object` is
    /// nil; `userInfo` holds `changedKeysKey` (`[String]`) and `tierKey`
    /// (`ConfigTier`). Posted from AppDNA's delivery queue, in order;
    /// observers that name a queue (`queue: .main`) run there.
    public static let configUpdated = Notification.Name("AppDNAConfigUpdated")
    /// `userInfo` key of `configUpdated`: the top-level keys that changed.
    public static let changedKeysKey = "changedKeys"
    /// `userInfo` key of `configUpdated`: the tier now served.
    public static let tierKey = "tier"

    // MARK: Configuring

    /// Opens AppDNA for `apiKey`, replacing any earlier configuration (its
    /// listener is removed and its queue closed first; its queued events
    /// stay in its data directory). Returns at once: the opening happens on
    /// AppDNA's queue, before any later `track`. No network traffic happens
    /// on the calling thread; the live config stream starts in the
    /// background. An invalid argument or unusable data directory leaves
    /// AppDNA unconfigured, logged and reported by `ready()`.
    public static func configure(apiKey: String, environment: AppDNAEnvironment = .production,
                                 options: AppDNAOptions = AppDNAOptions()) {
        let devServer = state.withLock { $0.devServer }
        worker.async {
            reopen(apiKey: apiKey, apiURL: devServer?.apiURL ?? environment.apiURL,
                   dataRoot: devServer?.dataRoot, options: options)
        }
    }

    /// For tests and local development, like Firebase's emulator switch:
    /// from the next `configure` on, every environment (`.production`
    /// included) talks to `apiURL`, for instance the local dev server, and
    /// default data directories go under `dataRoot` when it is given
    /// instead of Application Support. Affects this process only.
    public static func useDevServer(apiURL: String, dataRoot: String? = nil) {
        state.withLock { $0.devServer = DevServer(apiURL: apiURL, dataRoot: dataRoot) }
    }

    /// Undoes `useDevServer` for later `configure` calls.
    public static func stopUsingDevServer() {
        state.withLock { $0.devServer = nil }
    }

    /// Waits (without blocking a thread) until every earlier `configure`,
    /// `track` and `setConsent` has been applied. Throws why the latest
    /// configure failed, or `.wrongState` when AppDNA is not configured.
    public static func ready() async throws {
        let outcome: AppNorthError? = await onWorker {
            state.withLock { s in
                s.session != nil ? nil : (s.configureError ?? .wrongState("AppDNA is not configured"))
            }
        }
        if let outcome { throw outcome }
    }

    /// Stops AppDNA: flushes for at most `flushTimeout` seconds (0: no
    /// flush; what is not sent stays on disk for the next start), removes
    /// the config listener, and joins the core's threads. When it returns no
    /// `configUpdated` of that configuration is posted any more and config
    /// reads give the defaults. `configure` may be called again. Waits
    /// without blocking a thread.
    public static func shutdown(flushTimeout: TimeInterval = 0) async {
        let flushMs = (try? milliseconds(flushTimeout, in: 0...3600, what: "flushTimeout")) ?? 0
        await onWorker {
            closeCurrent(flushMilliseconds: flushMs)
            state.withLock { $0.readable = nil }
        }
    }

    /// Whether AppDNA has an open configuration now (earlier calls may
    /// still be waiting on its queue: see `ready()`).
    public static var isConfigured: Bool { state.withLock { $0.session != nil } }

    /// The most recent failure of `configure`, `track` or `setConsent`, or
    /// nil; a successful configure clears it.
    public static var lastError: AppNorthError? { state.withLock { $0.lastError } }

    // MARK: Events

    /// Queues an event: it is written to disk on AppDNA's queue (in call
    /// order, within milliseconds) and uploaded in batches by the core.
    /// `properties` must be JSON values (strings, numbers, booleans, null,
    /// arrays and dictionaries of them); they are serialised here, so the
    /// caller's values are not kept. Silently dropped, stored nowhere, while
    /// analytics consent is revoked. Before `configure` the event is
    /// dropped and `lastError` says so.
    public static func track(_ event: String, properties: [String: Any]? = nil) {
        var propertiesJSON: String?
        if let properties {
            guard JSONSerialization.isValidJSONObject(properties),
                  let data = try? JSONSerialization.data(withJSONObject: properties),
                  let text = String(data: data, encoding: .utf8) else {
                report(.invalidArgument("AppDNA.track: properties of \"\(event)\" are not JSON values; event dropped"))
                return
            }
            propertiesJSON = text
        }
        let json = propertiesJSON
        worker.async {
            guard let events = state.withLock({ $0.session?.events }) else {
                report(.wrongState("AppDNA.track before configure: event dropped"))
                return
            }
            do throws(AppNorthError) {
                try events.track(event, propertiesJSON: json)
            } catch {
                report(error)
            }
        }
    }

    /// Uploads every queued event now. Waits, without blocking a thread, for
    /// earlier calls to be applied and then for the upload, at most
    /// `timeout` seconds; returns how many events the server accepted.
    /// Throws the upload's error, `.timeout`, `.wrongState` when not
    /// configured, or `CancellationError` when the task is cancelled (the
    /// request in flight ends at once; the events stay queued).
    @discardableResult
    public static func flush(timeout: TimeInterval = 10) async throws -> Int {
        let timeoutMs = try milliseconds(timeout, in: 0...3600, what: "flush timeout")
        guard let session = await onWorker({ state.withLock { $0.session } }) else {
            throw AppNorthError.wrongState("AppDNA is not configured")
        }
        // On the library's own threads, with the module's cancellation rules.
        return try await BlockingCall.run(cancelling: session.client) {
            try session.events.flush(timeoutMilliseconds: timeoutMs)
        }
    }

    // MARK: Consent

    /// Persists the user's analytics choice in the data directory. Revoked:
    /// events are dropped, not stored, and the queue is purged; granted:
    /// only events tracked from then on are queued. The latest choice also
    /// carries over to every later `configure` in this process (another
    /// account's data directory included), and a choice made before
    /// `configure` is applied when it opens.
    public static func setConsent(analytics granted: Bool) {
        state.withLock { $0.consentChoice = granted }
        withEvents(nil) { events throws(AppNorthError) in try events.setConsent(analytics: granted) }
    }

    /// The analytics choice: this process's latest `setConsent`, else the
    /// one stored in the open data directory, else `.unknown`.
    public static var analyticsConsent: ConsentState {
        let (choice, events) = state.withLock { ($0.consentChoice, $0.session?.events) }
        if let choice { return choice ? .granted : .revoked }
        return events?.consent ?? .unknown
    }

    // MARK: Sessions, network and identity

    /// The app came to the foreground, the seed's "foreground event": uploads
    /// that the circuit breaker paused resume, and a flush starts. Linux has
    /// no app lifecycle to watch: call it from the host's own hook.
    public static func foreground() {
        withEvents("foreground") { events throws(AppNorthError) in try events.foreground() }
    }

    /// The network the device is on, which sets the upload batch size (the
    /// seed's adaptive batches: Wi-Fi 100, cellular 50, expensive cellular
    /// 20; `.unknown`, the default, counts as expensive). Linux cannot tell
    /// by itself: the host says. Kept for later configures in this process.
    public static func setNetworkType(_ type: NetworkType) {
        state.withLock { $0.networkType = type }
        withEvents(nil) { events throws(AppNorthError) in try events.setNetworkType(type) }
    }

    /// Identifies the signed-in user: later events carry the id as
    /// `user_id`. Kept in the data directory's secure store (a 0600 file,
    /// the Keychain's stand-in) across restarts; never logged.
    public static func identify(userID: String) {
        withEvents("identify") { events throws(AppNorthError) in try events.identify(userID: userID) }
    }

    /// Forgets the user id (logout); the anonymous id stays.
    public static func resetUser() {
        withEvents("resetUser") { events throws(AppNorthError) in try events.reset() }
    }

    // MARK: Remote config

    /// Typed reads of the effective config; see `AppDNAConfig`.
    public static var config: AppDNAConfig { AppDNAConfig(source: state.withLock { $0.readable }) }

    // MARK: - State

    struct DevServer: Sendable {
        let apiURL: String
        let dataRoot: String?
    }

    struct State: Sendable {
        /// The open configuration.
        var session: AppDNASession?
        /// What config reads use: the open configuration's config, or the
        /// previous one's (closed; it reads from memory) while a reconfigure
        /// opens the next.
        var readable: AppNorthRemoteConfig?
        /// The configuration whose notifications may be posted (0: none).
        var activeID: UInt64 = 0
        var lastID: UInt64 = 0
        var consentChoice: Bool?
        var networkType: NetworkType?
        var configureError: AppNorthError?
        var lastError: AppNorthError?
        var devServer: DevServer?
        var logger = AppDNAOptions.standardErrorLogger
    }

    static let state = Mutex(State())
    /// Applies configure, track and setConsent in call order.
    static let worker = DispatchQueue(label: "AppDNA.worker")
    /// Posts `configUpdated`, in order, never from a core thread: a
    /// `queue: .main` observer makes a post wait for the main queue.
    static let delivery = DispatchQueue(label: "AppDNA.delivery")

    /// Runs `body` on the worker after the calls queued before it, and
    /// returns its result without blocking the awaiting thread.
    static func onWorker<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            worker.async { continuation.resume(returning: body()) }
        }
    }

    /// On the worker: closes the open configuration, then opens the next.
    static func reopen(apiKey: String, apiURL: String, dataRoot: String?, options: AppDNAOptions) {
        closeCurrent(flushMilliseconds: 0)
        let (id, consent, network) = state.withLock { s -> (UInt64, Bool?, NetworkType?) in
            s.lastID &+= 1
            s.activeID = s.lastID
            s.logger = options.logger
            return (s.lastID, s.consentChoice, s.networkType)
        }
        let session: AppDNASession
        do throws(AppNorthError) {
            session = try AppDNASession.open(id: id, apiKey: apiKey, apiURL: apiURL, dataRoot: dataRoot,
                                             options: options, consent: consent, networkType: network)
        } catch {
            state.withLock { s in
                s.activeID = 0
                s.readable = nil
                s.configureError = error
            }
            report(error)
            return
        }
        state.withLock { s in
            s.session = session
            s.readable = session.config
            s.configureError = nil
            s.lastError = nil
        }
        // A cached or bundled config is there from the start: say so before
        // any later change can be posted.
        let resolved = session.config.resolved
        if resolved.tier != .default {
            deliver(id, ConfigChange(config: resolved.document.text, changedKeys: resolved.document.keys,
                                     tier: resolved.tier))
        }
        do throws(AppNorthError) {
            try session.startUpdates(live: options.liveUpdates) { change in deliver(id, change) }
        } catch {
            report(error)
        }
    }

    /// On the worker: retires the open configuration. After it returns no
    /// notification of it is being posted or will be.
    static func closeCurrent(flushMilliseconds: Int) {
        let session = state.withLock { s -> AppDNASession? in
            defer { s.session = nil; s.activeID = 0 }
            return s.session
        }
        guard let session else { return }
        session.close(flushMilliseconds: flushMilliseconds)
        // A post in progress (it checked activeID before we cleared it)
        // finishes before we go on.
        delivery.sync {}
    }

    /// Called by the core on its config thread (no library lock held):
    /// hands the change to the delivery queue and returns.
    static func deliver(_ id: UInt64, _ change: ConfigChange) {
        delivery.async {
            guard state.withLock({ $0.activeID == id }) else { return }
            NotificationCenter.default.post(name: configUpdated, object: nil,
                                            userInfo: [changedKeysKey: change.changedKeys, tierKey: change.tier])
        }
    }

    /// On the worker, after the calls before it: `body` on the open event
    /// queue, its failure reported. Without a configuration: reported as
    /// `.wrongState` when `call` names the call, else nothing to do (the
    /// choice is remembered for the next configure).
    static func withEvents(_ call: String?, _ body: @escaping @Sendable (AppNorthEvents) throws(AppNorthError) -> Void) {
        worker.async {
            guard let events = state.withLock({ $0.session?.events }) else {
                if let call { report(.wrongState("AppDNA.\(call) before configure: ignored")) }
                return
            }
            do throws(AppNorthError) {
                try body(events)
            } catch {
                report(error)
            }
        }
    }

    static func report(_ error: AppNorthError) {
        let logger = state.withLock { s -> Logger in
            s.lastError = error
            return s.logger
        }
        logger.log(.error, error.message)
    }
}
