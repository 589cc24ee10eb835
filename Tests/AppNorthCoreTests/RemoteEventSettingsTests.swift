import XCTest
import Synchronization
@testable import AppNorthCore

/// The config key `appnorth.events` (issue #40 item 6) and the sample
/// rate: the pure reading of the key (`RemoteEventSettings`), the gate
/// word `track` reads (`EventSettingsOwner`), the trigger adopting new
/// figures, and the whole path from a config to an events handle at the
/// dev server.
final class RemoteEventSettingsTests: EventsTestCase {
    override class var isolatedApp: Bool { true }

    // MARK: The key, read as a value

    func testAValidKeySetsItsFieldsAndAbsentOnesLeaveTheOptions() {
        let (remote, refused) = RemoteEventSettings.read(
            #"{"enabled":false,"sample_rate":0.25,"blocked_events":["a","b"],"flush_interval_ms":500,"batch_threshold":3,"future":1}"#,
            over: RemoteEventSettings())
        XCTAssertEqual(refused, [], "an unknown field is ignored, not refused")
        var local = EventSettings()
        local.flushIntervalMilliseconds = 9000
        let applied = remote.applied(to: local)
        XCTAssertEqual(applied.enabled, false)
        XCTAssertEqual(applied.sampleRate, 0.25)
        XCTAssertEqual(applied.blockedEvents, ["a", "b"])
        XCTAssertEqual(applied.flushIntervalMilliseconds, 500)
        XCTAssertEqual(applied.batchThreshold, 3)
        let partial = RemoteEventSettings.read(#"{"batch_threshold":7}"#, over: remote).0.applied(to: local)
        XCTAssertEqual(partial.enabled, true, "a field left out goes back to the option")
        XCTAssertEqual(partial.flushIntervalMilliseconds, 9000)
        XCTAssertEqual(partial.batchThreshold, 7)
        XCTAssertEqual(RemoteEventSettings.read(nil, over: remote).0, RemoteEventSettings(), "no key: the options")
    }

    func testOutOfRangeOrMistypedFieldsAreRefusedAndKeepTheLastGoodValue() {
        let good = RemoteEventSettings.read(#"{"sample_rate":0.5,"batch_threshold":5,"enabled":false}"#,
                                            over: RemoteEventSettings()).0
        let (after, refused) = RemoteEventSettings.read(
            #"{"sample_rate":1.5,"batch_threshold":0,"enabled":"no","flush_interval_ms":9,"blocked_events":["ok",""]}"#,
            over: good)
        XCTAssertEqual(refused.count, 5, "\(refused)")
        XCTAssertEqual(after.sampleRate, 0.5)
        XCTAssertEqual(after.batchThreshold, 5)
        XCTAssertEqual(after.enabled, false)
        XCTAssertNil(after.flushIntervalMilliseconds, "never had a good value: the option's stays")
        XCTAssertNil(after.blockedEvents)
        for bad in ["-0.1", "\"0.5\"", "null", "1e999", "true"] {
            XCTAssertEqual(RemoteEventSettings.read(#"{"sample_rate":\#(bad)}"#, over: good).0.sampleRate, 0.5, bad)
        }
        XCTAssertEqual(RemoteEventSettings.read(#"{"batch_threshold":10001}"#, over: good).0.batchThreshold, 5)
        XCTAssertEqual(RemoteEventSettings.read(#"{"flush_interval_ms":86400001}"#, over: good).1.count, 1)
        let tooMany = "[" + (0...EventSettings.maxBlockedEvents).map { "\"e\($0)\"" }.joined(separator: ",") + "]"
        XCTAssertEqual(RemoteEventSettings.read(#"{"blocked_events":\#(tooMany)}"#, over: good).1.count, 1)
        let long = String(repeating: "x", count: 257)
        XCTAssertEqual(RemoteEventSettings.read(#"{"blocked_events":["\#(long)"]}"#, over: good).1.count, 1)
        for notObject in ["5", "[]", "\"off\"", "false"] {
            let (kept, why) = RemoteEventSettings.read(notObject, over: good)
            XCTAssertEqual(kept, good, notObject)
            XCTAssertEqual(why, ["appnorth.events is not a JSON object"])
        }
    }

    func testSampleRatesZeroAndOneAreExactAndBothIntegerAndReal() {
        for (text, rate) in [("0", 0.0), ("1", 1.0), ("0.0", 0.0), ("1.0", 1.0)] {
            XCTAssertEqual(RemoteEventSettings.read(#"{"sample_rate":\#(text)}"#, over: RemoteEventSettings()).0.sampleRate,
                           rate, text)
        }
        for id in ["", "a", "0190e2b4-0000-7000-8000-000000000000", String(repeating: "\u{ff}", count: 40)] {
            let fraction = EventSettingsOwner.fraction(of: id)
            XCTAssertTrue(fraction >= 0 && fraction < 1, id)
            var settings = EventSettings()
            settings.sampleRate = 1
            XCTAssertEqual(EventSettingsOwner.gate(of: settings, fraction), 0, "rate 1 keeps every install")
            settings.sampleRate = 0
            XCTAssertEqual(EventSettingsOwner.gate(of: settings, fraction), EventSettingsOwner.sampledOutBit,
                           "rate 0 keeps none")
        }
    }

    func testTheSampleShareOfManyInstallsIsTheRate() {
        var kept = 0
        for i in 0..<10_000 where EventSettingsOwner.fraction(of: "install-\(i)") < 0.1 { kept += 1 }
        XCTAssertTrue((800...1200).contains(kept), "\(kept) of 10,000 installs at 0.1")
    }

    func testTheOwnerIgnoresAnOlderDeliveryAndLogsRefusalsOnce() {
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .debug) { _, line in lines.withLock { $0.append(line) } }
        let owner = EventSettingsOwner(local: EventSettings(), anonymousID: "x", logger: logger)
        XCTAssertEqual(owner.gate.load(ordering: .relaxed), 0, "defaults: track pays one load")
        owner.receive(#"{"enabled":false}"#, sequence: 2)
        owner.receive(#"{"enabled":true}"#, sequence: 1)
        XCTAssertFalse(owner.current.enabled, "the older delivery lost")
        XCTAssertFalse(owner.uploadsEnabled)
        owner.receive(#"{"enabled":true,"sample_rate":2,"batch_threshold":-1}"#, sequence: 3)
        XCTAssertTrue(owner.current.enabled)
        let refusals = lines.withLock { $0 }.filter { $0.contains("refused") }
        XCTAssertEqual(refusals.count, 1, "\(refusals)")
        XCTAssertTrue(refusals[0].contains("sample_rate") && refusals[0].contains("batch_threshold"), refusals[0])
        owner.receive(#"{"blocked_events":["no"]}"#, sequence: 4)
        XCTAssertEqual(owner.gate.load(ordering: .relaxed), EventSettingsOwner.blockedBit)
        var name = "no", other = "yes"
        XCTAssertEqual(name.withUTF8 { owner.drop($0) }, .blocked)
        XCTAssertNil(other.withUTF8 { owner.drop($0) })
    }

    func testTheTriggerAdoptsANewThresholdAndInterval() {
        var t = UploadTrigger(threshold: 20, intervalMilliseconds: 30_000, openedAt: 0)
        t.adopt(threshold: 5, intervalMilliseconds: 1000)
        let seen = UploadTrigger.Inputs(now: 0, queued: 4, flushRequested: 0, breakerOpen: false)
        XCTAssertEqual(t.next(seen), .sleep(milliseconds: 1000, wakeAt: 5))
        _ = t.cycleEnded(.kept, at: 0, flushTarget: 0, queued: 10, failures: 1,
                         schedule: Backoff(retries: 3, baseMilliseconds: 1, spread: 0), retryAfterUntil: 0)
        t.adopt(threshold: 8, intervalMilliseconds: 1000)
        XCTAssertEqual(t.next(.init(now: 5_000_000, queued: 17, flushRequested: 0, breakerOpen: false)),
                       .sleep(milliseconds: 995, wakeAt: 18), "ten left by the failed cycle, then the new threshold")
    }

    // MARK: From a config to an events handle

    private func openConfig(_ client: AppNorthClient, bundled: String? = nil) throws -> AppNorthRemoteConfig {
        try AppNorthRemoteConfig(client: client, options: .init(dataDirectory: folder + "/config", bundledPath: bundled))
    }

    private func publish(_ config: String) throws {
        try TestServer.post("/admin/apps/\(app)/config", #"{"config":\#(config)}"#)
    }

    private func stats(_ events: AppNorthEvents) throws -> JSON { try JSON.parse(events.statsJSON()) }

    func testABundledSwitchAppliesAtOpenAndARemoteOneLiveThenTheCachedTierKeepsItOffline() throws {
        let client = try TestServer.client(app: app)
        let bundledPath = folder + "-bundle.json"
        _ = system("mkdir -p '\(folder)' && printf '%s' '{\"appnorth.events\":{\"blocked_events\":[\"noisy\"]}}' > '\(bundledPath)'")
        defer { _ = system("rm -f '\(bundledPath)'") }
        do {
            let config = try openConfig(client, bundled: bundledPath)
            let events = try open(quiet(), client: client)
            XCTAssertFalse(try events.track("noisy"), "the bundled tier's block list applies from the first event")
            XCTAssertTrue(try events.track("kept"))
            try publish(#"{"appnorth.events":{"enabled":false},"other":1}"#)
            try config.refresh()
            XCTAssertFalse(try events.track("kept"), "switched off by the remote tier")
            XCTAssertThrowsError(try events.flush(timeoutMilliseconds: 5000)) { error in
                XCTAssertTrue("\(error)".contains("switched off"), "\(error)")
            }
            let s = try stats(events)
            XCTAssertEqual(s["dropped"]?["blocked"]?.intValue, 1)
            XCTAssertEqual(s["dropped"]?["disabled"]?.intValue, 1)
            XCTAssertEqual(s["queued"]?.intValue, 1, "the event queued before stays queued")
            XCTAssertEqual(s["settings"]?["enabled"]?.boolValue, false)
            XCTAssertEqual(s["settings"]?["remote"]?.boolValue, true)
            events.close(timeoutMilliseconds: 0)
            config.close()
        }
        // Restart offline: the cached tier keeps it off.
        try TestServer.offline {
            let config = try openConfig(client)
            XCTAssertEqual(config.source.tier, .cached)
            let events = try open(quiet(), client: client)
            XCTAssertFalse(try events.track("kept"))
            XCTAssertEqual(try stats(events)["dropped"]?["disabled"]?.intValue, 1)
            events.close(timeoutMilliseconds: 0)
            config.close()
        }
        XCTAssertEqual(try serverEvents().count, 0, "nothing was uploaded while switched off")
        // Switched on again: the queued event goes.
        let config = try openConfig(client)
        let events = try open(quiet(), client: client)
        try publish(#"{"appnorth.events":{"enabled":true}}"#)
        try config.refresh()
        XCTAssertTrue(try events.track("after"))
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 5000), 2)
        XCTAssertEqual(Set(try serverEvents().compactMap { $0["name"]?.stringValue }), ["kept", "after"])
        events.close(timeoutMilliseconds: 0)
        config.close()
    }

    func testAHostThatOptsOutIgnoresTheKeyAndTheOptionSamples() throws {
        let client = try TestServer.client(app: app)
        try publish(#"{"appnorth.events":{"enabled":false}}"#)
        let config = try openConfig(client)
        try config.refresh()
        let optedOut = try open(quiet { $0.followsRemoteSettings = false; $0.sampleRate = 0 }, client: client)
        XCTAssertFalse(try optedOut.track("a"))
        let s = try stats(optedOut)
        XCTAssertEqual(s["dropped"]?["sampled"]?.intValue, 1, "sampled out by its option, not switched off")
        XCTAssertEqual(s["dropped"]?["disabled"]?.intValue, 0)
        XCTAssertEqual(s["settings"]?["remote"]?.boolValue, false)
        optedOut.close(timeoutMilliseconds: 0)
        var bad = quiet()
        bad.sampleRate = .nan
        XCTAssertThrowsError(try open(bad, client: client))
        bad.sampleRate = 1.01
        XCTAssertThrowsError(try open(bad, client: client))
        config.close()
    }
}
