import Foundation
import Synchronization
import XCTest
@testable import AppNorth

/// The AppDNA facade against the local dev server, through the seed's own
/// snippets (AppDNASeedSnippets) where the seed has one. Each test points
/// every environment at the dev server with a fresh data root, and shuts
/// AppDNA down at the end.
final class AppDNATests: XCTestCase {
    static let observed = "Config updated — refreshing UI"

    override func setUpWithError() throws {
        try TestServer.reset()
        AppDNA.useDevServer(apiURL: try TestServer.url(), dataRoot: try temporaryDirectory("root"))
        // A fresh "process": no choice carried from another test.
        AppDNA.state.withLock { $0.consentChoice = nil; $0.networkType = nil }
    }

    override func tearDownWithError() throws {
        try runOnMainRunLoop { await AppDNA.shutdown() }
        AppDNA.stopUsingDevServer()
    }

    /// Seed, "Config TTL" and "Config Update Notifications": configure as
    /// written, register the observer as written (`queue: .main`), publish
    /// a config at the server: the observer runs on the main thread and the
    /// getters serve the published values. Synchronous, so that this test
    /// runs on the main thread and serves the main run loop while it waits.
    func testTheSeedsObserverFiresOnTheMainQueueForAPublishedConfig() throws {
        AppDNASeedSnippets.configure()
        AppDNASeedSnippets.observeConfigUpdates()
        let before = SnippetOutput.count(of: Self.observed)
        try runOnMainRunLoop { try await AppDNA.ready() }
        XCTAssertEqual(AppDNA.config.tier, .default)

        try TestServer.publish(AppDNASeedSnippets.apiKey, #"{"welcome":"Hello","price":9.99,"slots":3,"dark":true,"banner":{"text":"Sale"}}"#)
        XCTAssertTrue(spinMainRunLoop(until: {
            SnippetOutput.count(of: Self.observed) > before && AppDNA.config.string("welcome", default: "") == "Hello"
        }), "the seed's observer did not run for a published config")
        XCTAssertTrue(SnippetOutput.all(Self.observed).allSatisfy(\.onMainThread), "queue: .main observers run on the main thread")

        let config = AppDNA.config
        XCTAssertEqual(config.tier, .remote)
        XCTAssertEqual(config.double("price", default: 0), 9.99)
        XCTAssertEqual(config.int("slots", default: 0), 3)
        XCTAssertEqual(config.bool("dark", default: false), true)
        XCTAssertEqual(config.json("price"), "9.99")
        struct Banner: Decodable, Equatable { let text: String }
        XCTAssertEqual(config.decode("banner", default: Banner(text: "none")), Banner(text: "Sale"))
        // Missing keys and wrong types give the caller's default.
        XCTAssertEqual(config.string("price", default: "fallback"), "fallback")
        XCTAssertEqual(config.int("price", default: -1), -1)
        XCTAssertEqual(config.bool("missing", default: true), true)
    }

    /// The notification's userInfo names the changed keys and the tier; a
    /// second publish posts again with only what changed.
    func testConfigUpdatedCarriesTheChangedKeysAndTier() throws {
        let received = Received()
        let token = NotificationCenter.default.addObserver(forName: AppDNA.configUpdated, object: nil, queue: nil) { note in
            received.append(note.userInfo?[AppDNA.changedKeysKey] as? [String] ?? [], note.userInfo?[AppDNA.tierKey] as? ConfigTier)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        AppDNA.configure(apiKey: "appdna-keys", environment: .production, options: AppDNAOptions(configTTL: 1800))
        try TestServer.publish("appdna-keys", #"{"a":1,"b":2}"#)
        XCTAssertTrue(spinMainRunLoop(until: { received.all.contains { $0.keys == ["a", "b"] } }))
        try TestServer.publish("appdna-keys", #"{"a":1,"b":3}"#)
        XCTAssertTrue(spinMainRunLoop(until: { received.all.contains { $0.keys == ["b"] } }))
        XCTAssertTrue(received.all.allSatisfy { $0.tier == .remote })
        XCTAssertEqual(AppDNA.config.int("b", default: 0), 3)
    }

    /// After a restart the cached config is served at once, and announced
    /// with one notification (tier cached) right after configure.
    func testACachedConfigIsServedAndAnnouncedAfterConfigure() throws {
        AppDNA.configure(apiKey: "appdna-cache", options: AppDNAOptions(configTTL: 1800))
        try TestServer.publish("appdna-cache", #"{"theme":"dark"}"#)
        XCTAssertTrue(spinMainRunLoop(until: { AppDNA.config.string("theme", default: "") == "dark" }))
        try runOnMainRunLoop { await AppDNA.shutdown() }
        XCTAssertEqual(AppDNA.config.string("theme", default: "none"), "none", "reads give defaults after shutdown")

        let received = Received()
        let token = NotificationCenter.default.addObserver(forName: AppDNA.configUpdated, object: nil, queue: nil) { note in
            received.append(note.userInfo?[AppDNA.changedKeysKey] as? [String] ?? [], note.userInfo?[AppDNA.tierKey] as? ConfigTier)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        AppDNA.configure(apiKey: "appdna-cache", options: AppDNAOptions(configTTL: 1800, liveUpdates: false))
        try runOnMainRunLoop { try await AppDNA.ready() }
        XCTAssertEqual(AppDNA.config.tier, .cached)
        XCTAssertEqual(AppDNA.config.string("theme", default: ""), "dark")
        XCTAssertTrue(spinMainRunLoop(until: { received.all.first?.tier == .cached }))
        XCTAssertEqual(received.all.first?.keys, ["theme"])
    }

    /// Seed, "Bundled Config": with nothing cached, the bundled file is
    /// served from the start (and announced); a published config replaces
    /// it. A missing bundled file does not stop configure.
    func testTheBundledConfigIsServedUntilARemoteOneArrives() throws {
        let bundled = try temporaryDirectory("bundle") + "/appdna-config.json"
        XCTAssertTrue(FileManager.default.createFile(atPath: bundled, contents: Data(#"{"theme":"bundled","price":1.50}"#.utf8)))
        let received = Received()
        let token = NotificationCenter.default.addObserver(forName: AppDNA.configUpdated, object: nil, queue: nil) { note in
            received.append(note.userInfo?[AppDNA.changedKeysKey] as? [String] ?? [], note.userInfo?[AppDNA.tierKey] as? ConfigTier)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        AppDNA.configure(apiKey: "appdna-bundle", options: AppDNAOptions(bundledConfigPath: bundled))
        try runOnMainRunLoop { try await AppDNA.ready() }
        XCTAssertEqual(AppDNA.config.string("theme", default: ""), "bundled")
        XCTAssertEqual(AppDNA.config.json("price"), "1.50")
        XCTAssertTrue(spinMainRunLoop(until: { received.all.first?.tier == .bundled }))

        try TestServer.publish("appdna-bundle", #"{"theme":"remote"}"#)
        XCTAssertTrue(spinMainRunLoop(until: { AppDNA.config.string("theme", default: "") == "remote" }))
        XCTAssertEqual(AppDNA.config.tier, .remote)
        XCTAssertEqual(AppDNA.config.double("price", default: -1), -1, "tiers are whole documents, never merged")
        XCTAssertTrue(spinMainRunLoop(until: { received.all.last?.tier == .remote }))

        AppDNA.configure(apiKey: "appdna-nobundle",
                         options: AppDNAOptions(bundledConfigPath: bundled + ".missing", logger: .silent))
        try runOnMainRunLoop { try await AppDNA.ready() }
        XCTAssertEqual(AppDNA.config.tier, .default)
    }

    /// `identify` puts the user id on later events; `foreground` starts an
    /// upload by itself; the network type sets the batch size and carries
    /// into a reconfigure.
    func testIdentifyForegroundAndNetworkType() async throws {
        let options = AppDNAOptions(flushInterval: 3600, batchSize: 10_000, liveUpdates: false)
        AppDNA.configure(apiKey: "appdna-user", options: options)
        AppDNA.identify(userID: "user-42")
        AppDNA.track("identified")
        AppDNA.foreground()
        let deadline = Date().addingTimeInterval(60)
        while try TestServer.eventNames("appdna-user").isEmpty && Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let events = try TestServer.events("appdna-user")
        XCTAssertEqual(events.map { $0["name"] as? String }, ["identified"])
        XCTAssertEqual(events.first?["user_id"] as? String, "user-42")

        AppDNA.resetUser()
        AppDNA.track("anonymous_again")
        try await AppDNA.flush()
        XCTAssertTrue(try TestServer.events("appdna-user").last?["user_id"] is NSNull)

        AppDNA.setNetworkType(.wifi)
        try await AppDNA.ready()
        XCTAssertTrue(try XCTUnwrap(AppDNA.state.withLock { $0.session }).events.statsJSON().contains(#""batch_size":100"#))
        AppDNA.configure(apiKey: "appdna-user", options: options)
        try await AppDNA.ready()
        XCTAssertTrue(try XCTUnwrap(AppDNA.state.withLock { $0.session }).events.statsJSON().contains(#""batch_size":100"#))
        AppDNA.state.withLock { $0.networkType = nil }

        await AppDNA.shutdown()
        AppDNA.identify(userID: "nobody")
        await assertError({ try await AppDNA.ready() }) { if case .wrongState = $0 { return true } else { return false } }
        if case .wrongState(let message)? = AppDNA.lastError {
            XCTAssertTrue(message.contains("identify"), message)
        } else {
            XCTFail("identify before configure was not reported: \(String(describing: AppDNA.lastError))")
        }
    }

    /// Seed, "Consent and Offline Behavior": events tracked while consent
    /// is revoked never reach the server, the revoked state survives a
    /// reconfigure and a restart (it is read back from the data directory),
    /// and after consent is granted only later events are sent.
    func testRevokedConsentDropsEventsAndSurvivesReconfigureAndRestart() async throws {
        AppDNASeedSnippets.configure()
        AppDNA.track("before_revoke", properties: ["price": 9.99, "tags": ["a", "b"]])
        let sent = try await AppDNA.flush()
        XCTAssertEqual(sent, 1)
        XCTAssertEqual(try TestServer.eventNames(AppDNASeedSnippets.apiKey), ["before_revoke"])

        AppDNASeedSnippets.revokeConsent()
        AppDNA.track("while_revoked")
        try await AppDNA.ready()
        XCTAssertEqual(AppDNA.analyticsConsent, .revoked)

        // Reconfigure, as an app switching accounts back does.
        AppDNASeedSnippets.configure()
        AppDNA.track("after_reconfigure")
        try await AppDNA.ready()
        XCTAssertEqual(AppDNA.analyticsConsent, .revoked)

        // A restart: nothing carried in memory; the data directory remembers.
        await AppDNA.shutdown()
        AppDNA.state.withLock { $0.consentChoice = nil }
        AppDNASeedSnippets.configure()
        try await AppDNA.ready()
        XCTAssertEqual(AppDNA.analyticsConsent, .revoked)
        AppDNA.track("after_restart")
        let flushed0 = try await AppDNA.flush()
        XCTAssertEqual(flushed0, 0)
        let session = try XCTUnwrap(AppDNA.state.withLock { $0.session })
        XCTAssertEqual(session.events.queuedCount, 0, "revoked: nothing is stored")

        AppDNA.setConsent(analytics: true)
        AppDNA.track("after_grant")
        let flushed1 = try await AppDNA.flush()
        XCTAssertEqual(flushed1, 1)
        XCTAssertEqual(try TestServer.eventNames(AppDNASeedSnippets.apiKey), ["before_revoke", "after_grant"])
    }

    /// A choice made before configure, or under another account, applies
    /// to the next configure in this process, before any event.
    func testAConsentChoiceCarriesIntoAnotherAccountsConfigure() async throws {
        AppDNA.setConsent(analytics: false)
        AppDNA.configure(apiKey: "appdna-first")
        AppDNA.track("first_dropped")
        AppDNA.configure(apiKey: "appdna-second")
        AppDNA.track("second_dropped")
        try await AppDNA.ready()
        XCTAssertEqual(AppDNA.state.withLock { $0.session?.events.consent }, .revoked)
        AppDNA.setConsent(analytics: true)
        AppDNA.track("second_kept")
        let flushed1 = try await AppDNA.flush()
        XCTAssertEqual(flushed1, 1)
        XCTAssertEqual(try TestServer.eventNames("appdna-first"), [])
        XCTAssertEqual(try TestServer.eventNames("appdna-second"), ["second_kept"])
    }

    /// Two accounts keep apart: each key has its own data directory, so
    /// events queued under one are never uploaded under the other.
    func testSwitchingAccountsKeepsEachAccountsQueue() async throws {
        AppDNA.configure(apiKey: "appdna-alice", options: AppDNAOptions(flushInterval: 3600, batchSize: 10_000))
        AppDNA.track("alice_event")
        try await AppDNA.ready()
        AppDNA.configure(apiKey: "appdna-bob", options: AppDNAOptions(flushInterval: 3600, batchSize: 10_000))
        AppDNA.track("bob_event")
        let flushed1 = try await AppDNA.flush()
        XCTAssertEqual(flushed1, 1)
        XCTAssertEqual(try TestServer.eventNames("appdna-bob"), ["bob_event"])
        XCTAssertEqual(try TestServer.eventNames("appdna-alice"), [])
        // Alice's event waited on disk for her next session (which uploads
        // it on opening: the flush may find it gone already).
        AppDNA.configure(apiKey: "appdna-alice")
        try await AppDNA.flush()
        XCTAssertEqual(try TestServer.eventNames("appdna-alice"), ["alice_event"])
    }

    /// Cancelling the task that awaits a flush ends the wait with
    /// `CancellationError` while the server holds the upload; the event stays
    /// queued and reaches the server once, later.
    func testCancellingAFlushEndsItAndKeepsTheEvent() async throws {
        AppDNA.configure(apiKey: "appdna-cancel",
                         options: AppDNAOptions(flushInterval: 3600, batchSize: 10_000, liveUpdates: false))
        AppDNA.track("held")
        try await AppDNA.ready()
        try TestServer.hold("/v1/apps/appdna-cancel/events")
        let flush = Task { try await AppDNA.flush(timeout: 120) }
        try await TestServer.waitUntilFaultsTaken()
        flush.cancel()
        do {
            let sent = try await flush.value
            XCTFail("the flush was not cancelled: \(sent) sent")
        } catch is CancellationError {
        }
        try TestServer.online()
        try await AppDNA.flush(timeout: 60)
        XCTAssertEqual(try TestServer.eventNames("appdna-cancel"), ["held"])
    }

    /// Bad input gets a clear error, never a crash, and AppDNA keeps going.
    func testBadArgumentsAreReportedAndLeaveAppDNAUsable() async throws {
        let quiet = AppDNAOptions(logger: .silent)
        for options in [AppDNAOptions(configTTL: 0, logger: .silent), AppDNAOptions(configTTL: .nan, logger: .silent),
                        AppDNAOptions(configTTL: .infinity, logger: .silent), AppDNAOptions(flushInterval: -1, logger: .silent),
                        AppDNAOptions(batchSize: 0, logger: .silent)] {
            AppDNA.configure(apiKey: "appdna-bad", options: options)
            await assertInvalidArgument { try await AppDNA.ready() }
        }
        for key in ["", "has space", "slash/key", String(repeating: "k", count: 129)] {
            AppDNA.configure(apiKey: key, options: quiet)
            await assertInvalidArgument { try await AppDNA.ready() }
        }
        // (The dev server switch would override the environment's URL.)
        AppDNA.stopUsingDevServer()
        AppDNA.configure(apiKey: "appdna-bad", environment: .custom(apiURL: "ftp://example.com"), options: quiet)
        await assertInvalidArgument { try await AppDNA.ready() }
        AppDNA.useDevServer(apiURL: try TestServer.url(), dataRoot: try temporaryDirectory("root"))
        XCTAssertFalse(AppDNA.isConfigured)
        AppDNA.track("not_configured")
        await assertError({ try await AppDNA.flush() }) { if case .wrongState = $0 { return true } else { return false } }

        AppDNA.configure(apiKey: "appdna-bad", options: quiet)
        AppDNA.track("", properties: nil)
        AppDNA.track("nan", properties: ["x": Double.nan])
        AppDNA.track("object", properties: ["x": Data()])
        AppDNA.track(String(repeating: "n", count: 300))
        AppDNA.track("kept", properties: ["nested": ["a": [1, 2.5, "x", true, NSNull()]]])
        try await AppDNA.ready()
        XCTAssertNotNil(AppDNA.lastError)
        let flushed1 = try await AppDNA.flush()
        XCTAssertEqual(flushed1, 1)
        XCTAssertEqual(try TestServer.eventNames("appdna-bad"), ["kept"])
        await assertInvalidArgument { try await AppDNA.flush(timeout: -1) }
    }

    /// An unusable data directory: configure fails with a storage error.
    func testAnUnusableDataDirectoryIsReported() async throws {
        let file = try temporaryDirectory("file") + "/plain-file"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        AppDNA.configure(apiKey: "appdna-dir", options: AppDNAOptions(dataDirectory: file + "/sub", logger: .silent))
        await assertError({ try await AppDNA.ready() }) { if case .storage = $0 { return true } else { return false } }
    }

    /// Shutdown from an observer's thread, reconfigure from inside an
    /// observer and many configures in a row: no deadlock, and no
    /// notification of a configuration arrives after its shutdown returned.
    func testReconfigureAndShutdownAreSafeFromObserversAndInARow() throws {
        let received = Received()
        let token = NotificationCenter.default.addObserver(forName: AppDNA.configUpdated, object: nil, queue: nil) { note in
            received.append([], nil)
            // Reconfiguring from inside an observer only queues the work.
            if received.all.count == 1 { AppDNA.configure(apiKey: "appdna-inside") }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        for round in 0..<5 { AppDNA.configure(apiKey: "appdna-round-\(round)") }
        AppDNA.configure(apiKey: "appdna-inside")
        try TestServer.publish("appdna-inside", #"{"v":1}"#)
        XCTAssertTrue(spinMainRunLoop(until: { received.all.count >= 1 }))
        try runOnMainRunLoop {
            try await AppDNA.ready()
            await AppDNA.shutdown()
        }
        let after = received.all.count
        try TestServer.publish("appdna-inside", #"{"v":2}"#)
        // The server has the new version; a closed AppDNA posts nothing.
        XCTAssertTrue(spinMainRunLoop(until: { AppDNA.config.tier == .default }, timeout: 1))
        _ = spinMainRunLoop(until: { false }, timeout: 0.5)
        XCTAssertEqual(received.all.count, after)
    }

    /// The data folder layout: one component per server and key.
    func testDefaultDataDirectoryNames() throws {
        XCTAssertEqual(AppDNASession.folderName("adn_live_xxx"), "adn_live_xxx")
        XCTAssertEqual(AppDNASession.folderName(".."), "%2E.")
        XCTAssertEqual(AppDNASession.folderName("http://127.0.0.1:8080"), "http%3A%2F%2F127.0.0.1%3A8080")
        XCTAssertEqual(try AppDNASession.defaultDirectory(root: "/r", apiURL: "https://a.b", apiKey: "k"), "/r/https%3A%2F%2Fa.b/k")
    }

    // MARK: Helpers

    func assertInvalidArgument(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async {
        await assertError(body, file: file, line: line) { if case .invalidArgument = $0 { return true } else { return false } }
    }

    func assertError(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line,
                     _ matches: (AppNorthError) -> Bool) async {
        do {
            try await body()
            XCTFail("no error", file: file, line: line)
        } catch let error as AppNorthError {
            XCTAssertTrue(matches(error), "unexpected \(error)", file: file, line: line)
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
    }
}

/// What observers received, from any thread.
final class Received: Sendable {
    struct Note: Sendable {
        let keys: [String]
        let tier: ConfigTier?
    }

    private let notes = Mutex<[Note]>([])

    func append(_ keys: [String], _ tier: ConfigTier?) { notes.withLock { $0.append(Note(keys: keys, tier: tier)) } }
    var all: [Note] { notes.withLock { $0 } }
}
