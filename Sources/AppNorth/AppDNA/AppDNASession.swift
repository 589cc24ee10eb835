import AppNorthCore
import Foundation
import Synchronization

/// One configured AppDNA: a client, its event queue and its remote config
/// on one data directory. Opened and closed on AppDNA's worker queue only,
/// where blocking on disk and on the core's threads is allowed.
final class AppDNASession: Sendable {
    let id: UInt64
    let client: AppNorthClient
    let events: AppNorthEvents
    let config: AppNorthRemoteConfig
    let logger: Logger
    private let listenerToken = Mutex<Int64?>(nil)

    private init(id: UInt64, client: AppNorthClient, events: AppNorthEvents, config: AppNorthRemoteConfig, logger: Logger) {
        self.id = id
        self.client = client
        self.events = events
        self.config = config
        self.logger = logger
    }

    /// Opens the handles: no network traffic happens here. `consent` and
    /// `networkType`, the host's latest choices in this process, are applied
    /// before any event can be tracked.
    static func open(id: UInt64, apiKey: String, apiURL: String, dataRoot: String?, options: AppDNAOptions,
                     consent: Bool?, networkType: NetworkType?) throws(AppNorthError) -> AppDNASession {
        let configuration = try AppNorthClientConfiguration(apiURL: apiURL, appID: apiKey, logger: options.logger)
        let ttl = try options.configTTLSeconds()
        var eventsOptions = try options.eventsOptions()
        if let networkType { eventsOptions.networkType = networkType }
        var path = options.dataDirectory ?? ""
        if options.dataDirectory == nil {
            path = try defaultDirectory(root: dataRoot, apiURL: configuration.apiURL, apiKey: apiKey)
        }
        let client = AppNorthClient(configuration: configuration)
        let directory = try DataDirectory(path: path)
        let events = try AppNorthEvents(client: client, directory: directory, options: eventsOptions)
        do throws(AppNorthError) {
            if let consent { try events.setConsent(analytics: consent) }
            let config = try AppNorthRemoteConfig(client: client, options: AppNorthRemoteConfig.Options(
                dataDirectory: directory.path, bundledPath: options.bundledConfig(), ttlSeconds: ttl, logger: options.logger))
            return AppDNASession(id: id, client: client, events: events, config: config, logger: options.logger)
        } catch {
            events.close(timeoutMilliseconds: 0)
            throw error
        }
    }

    /// Registers the config listener, then starts the live stream (when
    /// asked), so that no change is missed.
    func startUpdates(live: Bool, deliver: @escaping @Sendable (ConfigChange) -> Void) throws(AppNorthError) {
        let token = try config.addListener(deliver)
        listenerToken.withLock { $0 = token }
        if live { try config.startLiveUpdates() }
    }

    /// Removes the listener (waiting for a callback in flight), stops the
    /// config's thread, then closes the event queue after flushing for at
    /// most `flushMilliseconds`. Queued events stay on disk.
    func close(flushMilliseconds: Int) {
        if let token = listenerToken.withLock({ token -> Int64? in defer { token = nil }; return token }) {
            try? config.removeListener(token)
        }
        config.close()
        events.close(timeoutMilliseconds: flushMilliseconds)
    }

    // MARK: Where data lives

    /// `<root>/<server>/<apiKey>`, the root being Application Support's
    /// `AppDNA` folder unless the dev server switch names another. One
    /// folder per server and key: the event queue is not scoped by app,
    /// so two accounts must never share one.
    static func defaultDirectory(root: String?, apiURL: String, apiKey: String) throws(AppNorthError) -> String {
        let base: String
        if let root {
            base = root
        } else if let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first {
            base = support.appendingPathComponent("AppDNA").path
        } else {
            throw .storage("no Application Support directory: pass AppDNAOptions(dataDirectory:)")
        }
        return base + "/" + folderName(apiURL) + "/" + folderName(apiKey)
    }

    /// A name that is one safe path component: letters, digits, '.', '-'
    /// and '_' kept, everything else (and a leading dot) percent-encoded,
    /// so that distinct inputs never share a folder.
    static func folderName(_ text: String) -> String {
        var name = ""
        for byte in text.utf8 {
            let keep = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || (byte == UInt8(ascii: ".") && !name.isEmpty)
            name += keep ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
        }
        return name
    }
}
