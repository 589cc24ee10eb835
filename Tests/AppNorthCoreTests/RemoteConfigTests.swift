import Glibc
import XCTest
@testable import AppNorthCore

/// Remote config against the real local server: one test per rule of
/// issue 4. Faults come from the server's admin endpoints; nothing is
/// mocked. Every test uses its own App ID and data directory.
final class RemoteConfigTests: XCTestCase {
    private var app = ""
    private var dir = ""
    private var opened: [AppNorthRemoteConfig] = []

    override func setUpWithError() throws {
        _ = try TestServer.url()
        app = "cfg-" + Random.hexToken(bytes: 6)
        dir = Self.tempDirectory()
    }

    override func tearDownWithError() throws {
        for config in opened { config.close() }
        opened = []
        try? TestServer.delete("/admin/faults")
        _ = Glibc.system("rm -rf '\(dir)'")
    }

    // MARK: Helpers

    static func tempDirectory() -> String {
        var template = Array("/tmp/appnorth-config-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    private func write(_ text: String, _ name: String) -> String {
        let path = dir + "/" + name
        let file = fopen(path, "wb")!
        fputs(text, file)
        fclose(file)
        return path
    }

    @discardableResult
    private func publish(_ config: String) throws -> Int64 {
        try TestServer.post("/admin/apps/\(app)/config", #"{"config":\#(config)}"#)["version"]?.intValue ?? 0
    }

    private func publishRaw(_ raw: String) throws {
        let body = JSON.object()
        body.set("raw", .string(raw))
        try TestServer.post("/admin/apps/\(app)/config", body.serialized())
    }

    private func client(timeouts: HTTPTimeouts = HTTPTimeouts(apiRequestMilliseconds: 3000,
                                                              resourceDownloadMilliseconds: 3000,
                                                              connectMilliseconds: 1000)) throws -> AppNorthClient {
        try TestServer.client(app: app, timeouts: timeouts)
    }

    private func open(client: AppNorthClient? = nil, bundled: String? = nil, dataDirectory: Bool = true,
                      ttl: Int = 3600, clock: any AppNorthClock = ManualClock(), poll: Int = 60_000,
                      backoff: Backoff = Backoff(baseMilliseconds: 20, maxMilliseconds: 200)) throws -> AppNorthRemoteConfig {
        let options = AppNorthRemoteConfig.Options(
            dataDirectory: dataDirectory ? dir + "/data" : nil, bundledPath: bundled, ttlSeconds: ttl, clock: clock,
            pollIntervalMilliseconds: poll, reconnectBackoff: backoff)
        let config = try AppNorthRemoteConfig(client: client ?? self.client(), options: options)
        opened.append(config)
        return config
    }

    /// The config's API requests since `seq`, as logged by the server.
    private func requests(since seq: Int64, path suffix: String) throws -> [JSON] {
        try TestServer.get("/admin/requests?since=\(seq)")["requests"]!.arrayElements.filter {
            ($0["path"]?.stringValue ?? "") == "/v1/apps/\(app)\(suffix)"
        }
    }

    /// The request log's last sequence number, once it has settled: the
    /// server logs a request after sending its response.
    private func lastSeq() throws -> Int64 {
        func read() throws -> Int64 {
            try TestServer.get("/admin/requests?since=0")["requests"]!.arrayElements.last?["seq"]?.intValue ?? 0
        }
        var seq = try read()
        while true {
            sleepMilliseconds(30)
            let again = try read()
            if again == seq { return seq }
            seq = again
        }
    }

    /// Polls until `condition` holds; the default 30 s only catch a hang.
    private func waitUntil(_ timeoutMs: Int = 30_000, _ condition: () throws -> Bool) rethrows -> Bool {
        let clock = SystemClock()
        let deadline = clock.monotonicNanoseconds() + UInt64(timeoutMs) * 1_000_000
        while clock.monotonicNanoseconds() < deadline {
            if try condition() { return true }
            sleepMilliseconds(5)
        }
        return try condition()
    }

    final class Changes: Sendable {
        let list = Lock<[ConfigChange]>([], level: LockClass.test)
        var all: [ConfigChange] { list.withLock { $0 } }
        var count: Int { list.withLock { $0.count } }
        func record(_ change: ConfigChange) { list.withLock { $0.append(change) } }
    }

    private func listen(_ config: AppNorthRemoteConfig) throws -> Changes {
        let changes = Changes()
        _ = try config.addListener { changes.record($0) }
        return changes
    }

    // MARK: Resolution

    func testResolutionRemoteOverCachedOverBundledOverDefaults() throws {
        try publish(#"{"theme":"dark","limit":5}"#)
        let bundled = write(#"{"theme":"light","limit":1,"only_bundled":true}"#, "appdna-config.json")

        // First launch, offline: the bundled file.
        let first = try TestServer.offline { () throws -> (AppNorthRemoteConfig, Changes) in
            let config = try open(bundled: bundled)
            XCTAssertEqual(config.source.tier, .bundled)
            XCTAssertEqual(config.string("theme", default: nil), "light")
            XCTAssertEqual(config.source.fetchedWallMilliseconds, 0)
            XCTAssertThrowsError(try config.refresh()) {
                guard case AppNorthError.network = $0 else { return XCTFail("\($0)") }
            }
            return (config, try listen(config))
        }
        let (config, changes) = first
        // Online: remote wins, the whole document (no merging with the bundle).
        try config.refresh()
        XCTAssertEqual(config.source.tier, .remote)
        XCTAssertEqual(config.string("theme", default: nil), "dark")
        XCTAssertEqual(config.integer("limit", default: 0), 5)
        XCTAssertFalse(config.bool("only_bundled", default: false), "tiers are not merged")
        XCTAssertEqual(changes.all.map(\.changedKeys), [["theme", "limit", "only_bundled"]])
        XCTAssertEqual(changes.all.first?.tier, .remote)
        config.close()

        // Restart offline: the cached copy, with its fetch time.
        let fetched = config.source.fetchedWallMilliseconds
        try TestServer.offline {
            let reopened = try open(bundled: bundled)
            XCTAssertEqual(reopened.source.tier, .cached)
            XCTAssertEqual(reopened.source.fetchedWallMilliseconds, fetched)
            XCTAssertEqual(reopened.string("theme", default: nil), "dark")
        }
    }

    func testNothingAnywhereGivesTheCallersDefaults() throws {
        let config = try open(dataDirectory: false)
        XCTAssertEqual(config.source.tier, .default)
        XCTAssertEqual(config.snapshot(), "{}")
        XCTAssertEqual(config.string("theme", default: "system"), "system")
        XCTAssertNil(config.string("theme", default: nil))
        XCTAssertEqual(config.integer("limit", default: 7), 7)
        XCTAssertEqual(config.double("ratio", default: 0.5), 0.5)
        XCTAssertTrue(config.bool("flag", default: true))
        XCTAssertEqual(config.json("obj", default: "[]"), "[]")
        // No config published: a refresh says so and changes nothing.
        XCTAssertThrowsError(try config.refresh()) {
            guard case AppNorthError.notFound = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(config.source.tier, .default)
    }

    func testTypedGettersReturnTheDefaultForMissingKeysAndWrongTypes() throws {
        try publish(#"{"s":"text","i":42,"r":2.5,"whole":3.0,"b":true,"n":null,"o":{"k":[1,2]},"a.b":"dotted"}"#)
        let config = try open()
        try config.refresh()
        XCTAssertEqual(config.string("s", default: "d"), "text")
        XCTAssertEqual(config.string("i", default: "d"), "d")
        XCTAssertEqual(config.string("n", default: "d"), "d")
        XCTAssertEqual(config.integer("i", default: -1), 42)
        XCTAssertEqual(config.integer("r", default: -1), -1)
        XCTAssertEqual(config.integer("whole", default: -1), -1, "3.0 is a real, not an integer")
        XCTAssertEqual(config.double("i", default: 0), 42)
        XCTAssertEqual(config.double("r", default: 0), 2.5)
        XCTAssertEqual(config.double("s", default: 0.25), 0.25)
        XCTAssertTrue(config.bool("b", default: false))
        XCTAssertFalse(config.bool("i", default: false))
        XCTAssertEqual(config.json("o", default: nil), #"{"k":[1,2]}"#)
        XCTAssertEqual(config.json("n", default: "0"), "null", "a present null is a value")
        XCTAssertEqual(config.json("missing", default: nil), nil)
        XCTAssertEqual(config.string("a.b", default: nil), "dotted", "keys are top-level keys, not paths")
        XCTAssertEqual(config.string("o.k", default: "none"), "none")
    }

    func testNumbersKeepTheSpellingTheyWereServedWith() throws {
        let served = #"{"price":9.99,"ratio":1.50,"nested":{"price":9.99,"list":[0.1,1e2]}}"#
        try publish(served)
        let config = try open()
        let changes = try listen(config)
        try config.refresh()
        XCTAssertEqual(config.snapshot(), served)
        XCTAssertEqual(config.json("price", default: nil), "9.99")
        XCTAssertEqual(config.json("nested", default: nil), #"{"price":9.99,"list":[0.1,1e2]}"#)
        XCTAssertEqual(config.double("price", default: 0), 9.99)
        XCTAssertEqual(changes.all.first?.config, served)
        config.close()
        let reopened = try open()
        XCTAssertEqual(reopened.source.tier, .cached)
        XCTAssertEqual(reopened.snapshot(), served, "the cache keeps the served text")
    }

    // MARK: TTL

    func testAFreshCacheIsServedWithoutFetching() throws {
        try publish(#"{"v":1}"#)
        let clock = ManualClock()
        let seeded = try open(clock: clock)
        try seeded.refresh()
        seeded.close()
        try publish(#"{"v":2}"#)

        let config = try open(ttl: 60, clock: clock)
        let seq = try lastSeq()
        clock.advance(milliseconds: 59_000)
        for _ in 0..<20 { XCTAssertEqual(config.integer("v", default: 0), 1) }
        sleepMilliseconds(100)
        XCTAssertEqual(try requests(since: seq, path: "/config").count, 0, "a fresh cache makes no request")
        XCTAssertEqual(config.source.tier, .cached)
    }

    func testAnExpiredCacheIsServedStaleWhileABackgroundFetchRuns() throws {
        try publish(#"{"v":1}"#)
        let clock = ManualClock()
        let seeded = try open(clock: clock)
        try seeded.refresh()
        seeded.close()
        try publish(#"{"v":2}"#)

        // A client whose fetch outlasts the hold below.
        let patient = try client(timeouts: HTTPTimeouts(apiRequestMilliseconds: 60_000, resourceDownloadMilliseconds: 60_000,
                                                        connectMilliseconds: 10_000))
        let config = try open(client: patient, ttl: 60, clock: clock)
        let changes = try listen(config)
        let seq = try lastSeq()
        // The server holds the fetch until the release: the read returns the
        // stale value while its fetch is held, so it waits for none.
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config","delay_ms":600000}"#)
        clock.advance(milliseconds: 60_000)
        XCTAssertEqual(config.integer("v", default: 0), 1, "stale value served")
        XCTAssertTrue(try waitUntil { try TestServer.held() == 1 }, "the read started a fetch, held at the server")
        XCTAssertEqual(changes.count, 0, "nothing delivered while the fetch is held")
        try TestServer.release()
        XCTAssertTrue(waitUntil { config.integer("v", default: 0) == 2 }, "the background fetch brought v2")
        XCTAssertEqual(config.source.tier, .remote)
        XCTAssertTrue(waitUntil { changes.count == 1 })
        XCTAssertEqual(changes.all.map(\.changedKeys), [["v"]])
        XCTAssertTrue(try waitUntil { try requests(since: seq, path: "/config").count == 1 })
        sleepMilliseconds(50)
        let fetches = try requests(since: seq, path: "/config")
        XCTAssertEqual(fetches.count, 1, "one background fetch for many reads")
        XCTAssertEqual(fetches.first?["headers"]?["If-None-Match"]?.stringValue, "\"1\"")
    }

    func testA304RefreshesTheFetchTimeAndFiresNothing() throws {
        try publish(#"{"v":1}"#)
        let clock = ManualClock()
        let config = try open(ttl: 60, clock: clock)
        try config.refresh()
        let first = config.source.fetchedWallMilliseconds
        let changes = try listen(config)
        let seq = try lastSeq()
        clock.advance(milliseconds: 61_000)
        _ = config.integer("v", default: 0)  // expired: revalidates in the background
        XCTAssertTrue(waitUntil { config.source.fetchedWallMilliseconds == first + 61_000 })
        XCTAssertTrue(try waitUntil { try requests(since: seq, path: "/config").count == 1 })
        let fetches = try requests(since: seq, path: "/config")
        XCTAssertEqual(fetches.map { $0["status"]?.intValue }, [304])
        XCTAssertEqual(changes.count, 0, "a 304 is not a change")
        XCTAssertEqual(config.lastFetchStatus.error, nil)
        // Fresh again: no more requests.
        for _ in 0..<10 { _ = config.integer("v", default: 0) }
        sleepMilliseconds(50)
        XCTAssertEqual(try requests(since: seq, path: "/config").count, 1)
        // And the new fetch time was persisted.
        config.close()
        XCTAssertEqual(try open(clock: clock).source.fetchedWallMilliseconds, first + 61_000)
    }

    func testSettingTheWallClockBackDoesNotMakeAStaleConfigFresh() throws {
        try publish(#"{"v":1}"#)
        let clock = ManualClock()
        let config = try open(ttl: 60, clock: clock)
        try config.refresh()
        let seq = try lastSeq()
        clock.advance(milliseconds: 61_000)
        clock.setWall(milliseconds: clock.wallMilliseconds() - 3_600_000)
        _ = config.integer("v", default: 0)
        XCTAssertTrue(try waitUntil { try requests(since: seq, path: "/config").count == 1 }, "still expired")
        config.close()

        // A cached copy stored "in the future" counts as expired.
        clock.setWall(milliseconds: clock.wallMilliseconds() - 3_600_000)
        let reopened = try open(ttl: 60, clock: clock)
        let seq2 = try lastSeq()
        XCTAssertEqual(reopened.source.tier, .cached)
        _ = reopened.integer("v", default: 0)
        XCTAssertTrue(try waitUntil { try requests(since: seq2, path: "/config").count == 1 })
    }

    func testIdenticalContentFiresNoListener() throws {
        try publish(#"{"price":1.5,"o":{"a":1,"b":2}}"#)
        let config = try open()
        try config.refresh()
        let changes = try listen(config)
        // A new version with the same values, spelled differently.
        try publish(#"{ "o":{"b":2,"a":1}, "price":1.50 }"#)
        try config.refresh()
        XCTAssertEqual(config.resolved.version, 2)
        XCTAssertEqual(changes.count, 0)
        XCTAssertEqual(config.snapshot(), #"{"price":1.5,"o":{"a":1,"b":2}}"#,
                       "equal content keeps the text already served: no silent change")
        try publish(#"{"price":1.75,"o":{"a":1,"b":2}}"#)
        try config.refresh()
        XCTAssertEqual(changes.all.map(\.changedKeys), [["price"]])
    }

    // MARK: Live updates

    func testLiveUpdatesArriveOverTheStream() throws {
        try publish(#"{"theme":"dark"}"#)
        let config = try open()
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 }, "the stream's first event brings the remote config")
        XCTAssertEqual(config.source.tier, .remote)
        let seq = try lastSeq()
        try publish(#"{"theme":"light","banner":"hi"}"#)
        XCTAssertTrue(waitUntil { changes.count == 2 })
        XCTAssertEqual(changes.all.last?.changedKeys, ["theme", "banner"])
        XCTAssertEqual(config.string("banner", default: nil), "hi")
        XCTAssertEqual(try requests(since: seq, path: "/config").count, 0, "no polling while the stream is up")
        XCTAssertEqual(config.resolved.etag, "\"2\"")
    }

    func testTheStreamReconnectsWithBackoffAndJitter() throws {
        try publish(#"{"v":1}"#)
        let seq = try lastSeq()
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config/stream","drop":true,"count":4}"#)
        let lines = Lock<[String]>([], level: LockClass.test)
        let options = AppNorthRemoteConfig.Options(
            dataDirectory: dir + "/data", clock: ManualClock(), pollIntervalMilliseconds: 60_000,
            reconnectBackoff: Backoff(baseMilliseconds: 40, maxMilliseconds: 1000),
            logger: Logger(minimum: .debug) { _, line in lines.withLock { $0.append(line) } })
        let config = try AppNorthRemoteConfig(client: try client(), options: options)
        opened.append(config)
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 }, "connected after four dropped attempts")
        let attempts = try requests(since: seq, path: "/config/stream")
        XCTAssertEqual(attempts.count, 5)
        XCTAssertEqual(attempts.prefix(4).map { $0["fault"]?.stringValue }, ["drop", "drop", "drop", "drop"])
        let times = attempts.map { $0["time_ms"]?.intValue ?? 0 }
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        // Delays: ceilings 40, 80, 160, 320 ms, jitter takes up to half off.
        // The delays the worker chose are exact (its log); the measured gaps
        // can only be longer on a loaded machine, never shorter.
        let chosen = lines.withLock { $0 }.compactMap { line -> Int64? in
            guard let range = line.range(of: "-> down (reconnect in ") else { return nil }
            return Int64(line[range.upperBound...].prefix { $0.isNumber })
        }
        XCTAssertEqual(chosen.count, 4, "\(chosen)")
        for (delay, ceiling) in zip(chosen, [40, 80, 160, 320] as [Int64]) {
            XCTAssertTrue((ceiling / 2 - 1...ceiling).contains(delay), "chosen delays \(chosen)")
        }
        for (gap, ceiling) in zip(gaps, [40, 80, 160, 320] as [Int64]) {
            XCTAssertGreaterThanOrEqual(gap, ceiling / 2 - 2, "gaps \(gaps)")
        }
        XCTAssertEqual(config.lastFetchStatus.error, nil, "the connected stream's event succeeded")
    }

    func testAReconnectSendsLastEventIDAndAnIdleStreamIsReplaced() throws {
        try publish(#"{"v":1}"#)
        // Keepalives slower than our idle timeout: the stream looks dead.
        try TestServer.post("/admin/settings", #"{"sse_keepalive":30}"#)
        defer { _ = try? TestServer.post("/admin/settings", #"{"sse_keepalive":15}"#) }
        let options = AppNorthRemoteConfig.Options(
            dataDirectory: dir + "/data", clock: ManualClock(),
            reconnectBackoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 100), streamIdleTimeoutMilliseconds: 1000)
        let config = try AppNorthRemoteConfig(client: try client(), options: options)
        opened.append(config)
        let changes = try listen(config)
        let seq = try lastSeq()
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 })
        XCTAssertTrue(try waitUntil(4000) { try requests(since: seq, path: "/config/stream").count >= 2 },
                      "an idle stream is dropped and reconnected")
        let streams = try requests(since: seq, path: "/config/stream")
        guard streams.count >= 2 else { return }
        XCTAssertNil(streams[0]["headers"]?["Last-Event-ID"]?.stringValue, "the first connection asks for the current config")
        XCTAssertEqual(streams[1]["headers"]?["Last-Event-ID"]?.stringValue, "1")
        try publish(#"{"v":2}"#)
        XCTAssertTrue(waitUntil { changes.count == 2 }, "updates flow on the new connection")
    }

    func testPollingTakesOverWhenTheStreamIsUnavailable() throws {
        try publish(#"{"v":1}"#)
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config/stream","status":503,"count":1000}"#)
        let config = try open(poll: 50, backoff: Backoff(baseMilliseconds: 5000, maxMilliseconds: 5000))
        let changes = try listen(config)
        let seq = try lastSeq()
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 }, "the first poll follows the refused stream at once")
        try publish(#"{"v":2}"#)
        XCTAssertTrue(waitUntil { changes.count == 2 }, "the next poll brings v2")
        XCTAssertEqual(config.integer("v", default: 0), 2)
        XCTAssertTrue(try waitUntil { try requests(since: seq, path: "/config").count >= 2 })
        XCTAssertEqual(try requests(since: seq, path: "/config/stream").count, 1, "the stream is retried after its backoff only")
    }

    func testTheWorkerLogsEachPhaseChange() throws {
        try publish(#"{"v":1}"#)
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config/stream","status":503,"count":1}"#)
        let lines = Lock<[String]>([], level: LockClass.test)
        let options = AppNorthRemoteConfig.Options(
            dataDirectory: dir + "/data", clock: ManualClock(), reconnectBackoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 200),
            logger: Logger(minimum: .debug) { _, line in lines.withLock { $0.append(line) } })
        let config = try AppNorthRemoteConfig(client: try client(), options: options)
        opened.append(config)
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 }, "the poll after the refused stream brings v1")
        let logged = lines.withLock { $0 }.filter { $0.hasPrefix("config worker: ") }
        XCTAssertTrue(logged.contains { $0.hasPrefix("config worker: exited -> ready") }, "\(logged)")
        XCTAssertTrue(logged.contains { $0.hasPrefix("config worker: ready -> streaming") }, "\(logged)")
        XCTAssertTrue(logged.contains { $0.hasPrefix("config worker: streaming -> down (reconnect in ") && $0.contains("refused") },
                      "\(logged)")
        XCTAssertTrue(logged.contains { $0.hasPrefix("config worker: down (") && $0.contains(" -> polling") }, "\(logged)")
    }

    func testStopLiveClosesTheStreamAndJoinsTheThread() throws {
        try TestServer.post("/admin/settings", #"{"sse_keepalive":3600}"#)  // only the stop can end the stream
        try publish(#"{"v":1}"#)
        let config = try open()
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 1 })
        XCTAssertTrue(try waitUntil { try TestServer.get("/admin/health")["sse_streams"]?.intValue == 1 })
        config.stopLiveUpdates()
        XCTAssertFalse(config.isLive, "stop returned with the live thread joined")
        XCTAssertTrue(try waitUntil { try TestServer.get("/admin/health")["sse_streams"]?.intValue == 0 }, "the server saw it close")
        try publish(#"{"v":2}"#)
        sleepMilliseconds(100)
        XCTAssertEqual(changes.count, 1, "no updates once stopped")
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { changes.count == 2 }, "live again")
    }

    func testCancellingAStreamEndsIt() throws {
        // No keepalive for an hour and a 90 s idle timeout: without the
        // cancel, nothing would end the stream for 90 s.
        try TestServer.post("/admin/settings", #"{"sse_keepalive":3600}"#)
        let transport = HTTPTransport()
        let cancel = CancellationToken()
        let canceller = try BackgroundThread(name: "canceller") { thread in
            _ = thread.sleep(milliseconds: 100)
            cancel.cancel()
        }
        XCTAssertThrowsError(try transport.stream(
            HTTPRequest(method: .get, url: try TestServer.url() + "/v1/apps/\(app)/config/stream"),
            idleTimeoutMs: 90_000, cancel: cancel) { _ in true }) { error in
            guard case AppNorthError.network("stream closed") = error else {  // the idle timeout: "stream idle"
                return XCTFail("the cancel, not the idle timeout, ended it: \(error)")
            }
        }
        canceller.stop()
    }

    // MARK: Bad data

    func testAnInvalidRemotePayloadKeepsTheLastGoodConfig() throws {
        try publish(#"{"v":1}"#)
        let config = try open()
        let changes = try listen(config)
        try config.refresh()
        try publishRaw(#"{"v": oops"#)
        XCTAssertThrowsError(try config.refresh()) {
            guard case AppNorthError.invalidJSON = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(config.integer("v", default: 0), 1)
        guard case .invalidJSON? = config.lastFetchStatus.error else { return XCTFail("\(config.lastFetchStatus)") }
        XCTAssertGreaterThan(config.lastFetchStatus.wallMilliseconds, 0)

        // Over the stream too, including a payload split over data: lines.
        try config.startLiveUpdates()
        try publishRaw("[\"not\",\n\"an object\"]")
        XCTAssertTrue(waitUntil { config.lastFetchStatus.error?.message.contains("stream") == true })
        XCTAssertEqual(config.integer("v", default: 0), 1)
        try publish(#"{"v":3}"#)
        XCTAssertTrue(waitUntil { changes.count == 2 })
        XCTAssertEqual(config.integer("v", default: 0), 3)
        XCTAssertEqual(config.lastFetchStatus.error, nil)
        XCTAssertEqual(changes.all.map(\.changedKeys), [["v"], ["v"]])
    }

    func testACorruptCacheRowIsDiscarded() throws {
        let store = try SQLiteStore(directory: try DataDirectory(path: dir + "/data"))
        try store.kvPut(namespace: "config", key: app, value: Array("{not json".utf8), updatedMs: 1)
        let bundled = write(#"{"v":0}"#, "bundle.json")
        try publish(#"{"v":1}"#)
        let config = try open(bundled: bundled)
        XCTAssertEqual(config.source.tier, .bundled)
        XCTAssertNil(try store.kvGet(namespace: "config", key: app), "the bad row is deleted")
        try config.refresh()
        XCTAssertEqual(try ConfigCache.decode(try XCTUnwrap(store.kvGet(namespace: "config", key: app)).value).document.text,
                       #"{"v":1}"#)
    }

    func testAMissingOrInvalidBundledFileIsReportedAndTheConfigFallsBack() throws {
        let missing = dir + "/nope.json"
        XCTAssertThrowsError(try AppNorthRemoteConfig.checkBundledFile(path: missing)) {
            guard case AppNorthError.storage(let message) = $0 else { return XCTFail("\($0)") }
            XCTAssertTrue(message.contains(missing), message)
        }
        for (name, text) in [("bad.json", #"{"a":"#), ("array.json", "[1,2]"), ("empty.json", "")] {
            let path = write(text, name)
            XCTAssertThrowsError(try AppNorthRemoteConfig.checkBundledFile(path: path), name) {
                guard case AppNorthError.invalidJSON(let message, _) = $0 else { return XCTFail("\($0)") }
                XCTAssertTrue(message.contains(path), message)
            }
            let config = try open(bundled: path)
            XCTAssertEqual(config.source.tier, .default, "falls back to the defaults")
            XCTAssertEqual(config.string("a", default: "fallback"), "fallback")
            guard case AppNorthError.invalidJSON? = config.bundledError else {
                return XCTFail("bundledError: \(String(describing: config.bundledError))")
            }
            config.close()
        }
        let good = try open(bundled: write(#"{"ok":true}"#, "good.json"))
        XCTAssertEqual(good.source.tier, .bundled)
        XCTAssertNil(good.bundledError)
    }

    func testOneConfigPerDataDirectoryAndApp() throws {
        let first = try open()
        XCTAssertThrowsError(try open()) {
            guard case AppNorthError.wrongState = $0 else { return XCTFail("\($0)") }
        }
        first.close()
        XCTAssertNoThrow(try open())
    }

    // MARK: Listeners and threads

    func testListenersCanRemoveThemselvesAndCloseTheConfigFromInsideACallback() throws {
        try publish(#"{"v":1}"#)
        let config = try open()
        let selfRemoving = Changes()
        let token = Lock<Int64>(0, level: LockClass.test)
        let t = try config.addListener { [weak config] change in
            selfRemoving.record(change)
            let mine = token.withLock { $0 }
            do { try config?.removeListener(mine) } catch { XCTFail("remove from inside: \(error)") }
            XCTAssertNotEqual(config?.integer("v", default: -1), -1, "reads work inside a callback")
        }
        token.withLock { $0 = t }
        let closer = Changes()
        _ = try config.addListener { [weak config] change in
            closer.record(change)
            if change.config.contains("3") { config?.close() }
        }
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { closer.count == 1 })
        try publish(#"{"v":2}"#)
        XCTAssertTrue(waitUntil { closer.count == 2 })
        XCTAssertEqual(selfRemoving.count, 1, "removed from inside its first callback")
        try publish(#"{"v":3}"#)
        XCTAssertTrue(waitUntil { closer.count == 3 })
        XCTAssertTrue(waitUntil { !config.isLive }, "closed by the listener (it records the change before it closes)")
        try publish(#"{"v":4}"#)
        sleepMilliseconds(100)
        XCTAssertEqual(closer.count, 3, "nothing after close")
        XCTAssertThrowsError(try config.removeListener(t)) {
            XCTAssertEqual($0 as? AppNorthError, .invalidArgument("no listener has token \(t)"))
        }
    }

    func testAValueWithTheNULEscapeIsAcceptedAndKeptExactly() throws {
        try publish(#"{"s":"a\u0000b","n":1}"#)
        let config = try open()
        try config.refresh()
        XCTAssertEqual(config.string("s", default: nil), "a\u{0}b")
        XCTAssertEqual(config.json("s", default: nil), #""a\u0000b""#)
        XCTAssertEqual(config.snapshot(), #"{"s":"a\u0000b","n":1}"#)
        config.close()
        let reopened = try open()
        XCTAssertEqual(reopened.source.tier, .cached, "the cached copy survives a reopen")
        XCTAssertEqual(reopened.snapshot(), #"{"s":"a\u0000b","n":1}"#)
    }

    func testARawNULByteInAServedConfigIsRefused() throws {
        try publish(#"{"v":1}"#)
        let config = try open()
        try config.refresh()
        try publishRaw("{\"v\": 2\u{0}, \"b\": \"x\"}")
        XCTAssertThrowsError(try config.refresh()) {
            guard case AppNorthError.invalidJSON(let message, _) = $0 else { return XCTFail("\($0)") }
            XCTAssertTrue(message.contains("NUL"), message)
        }
        XCTAssertEqual(config.snapshot(), #"{"v":1}"#)
        // Over the stream too: the last good config stays.
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil(10_000) { config.lastFetchStatus.error?.message.contains("NUL") == true })
        XCTAssertEqual(config.snapshot(), #"{"v":1}"#)
        config.close()
        let reopened = try open()
        XCTAssertEqual(reopened.source.tier, .cached)
        XCTAssertEqual(reopened.snapshot(), #"{"v":1}"#)
    }

    func testTheStatusReportsAStreamLineOverTheLimit() throws {
        try publish(#"{"v":1}"#)
        let config = try open()
        try config.refresh()
        XCTAssertNil(config.lastFetchStatus.error)
        // One line that never ends; the stream's next connection is normal.
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config/stream","endless_line":true}"#)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil(60_000) {
            if case .tooLarge? = config.lastFetchStatus.error { return true }
            return false
        }, "\(config.lastFetchStatus)")
        XCTAssertTrue(config.lastFetchStatus.error?.message.contains("stream") == true)
        XCTAssertEqual(config.integer("v", default: 0), 1, "the last good config stays")
        // The connection was closed and reopened.
        XCTAssertTrue(waitUntil(10_000) { (try? self.requests(since: 0, path: "/config/stream").count) ?? 0 >= 2 })
    }

    /// When `entry` was answered, by the server's clock (it logs a request
    /// before answering it, so the client got the answer after this).
    private func answered(_ entry: JSON) -> Int64 {
        (entry["time_ms"]?.intValue ?? 0) + Int64((entry["duration_ms"]?.doubleValue ?? 0).rounded(.down))
    }

    func testARefusedStreamWithRetryAfterHoldsBackThePollAndTheReconnect() throws {
        try publish(#"{"v":1}"#)
        let seq = try lastSeq()
        try TestServer.post("/admin/faults",
                            #"{"path_prefix":"/v1/apps/\#(app)/config/stream","status":503,"retry_after":"1","count":1}"#)
        // Without the Retry-After the poll would follow at once and the
        // stream would be retried within 20 ms.
        let config = try open(poll: 50, backoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 20))
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil(6000) { changes.count == 1 }, "connected once the Retry-After has passed")
        let streams = try requests(since: seq, path: "/config/stream")
        let polls = try requests(since: seq, path: "/config")
        XCTAssertGreaterThanOrEqual(streams.count, 2)
        guard let refused = streams.first, streams.count >= 2 else { return }
        XCTAssertEqual(refused["status"]?.intValue, 503)
        let notBefore = answered(refused) + 1000 - 2  // 2 ms: the log's whole milliseconds
        for next in streams.dropFirst() + polls {
            XCTAssertGreaterThanOrEqual(next["time_ms"]?.intValue ?? 0, notBefore,
                                        "\(next["path"]?.stringValue ?? "") came before the Retry-After passed")
        }
    }

    func testAPollAnsweredWithRetryAfterHoldsBackTheNextPoll() throws {
        try publish(#"{"v":1}"#)
        let seq = try lastSeq()
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config/stream","status":503,"count":1000}"#)
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config","method":"GET","status":429,"retry_after":"1","count":1}"#)
        let config = try open(poll: 50, backoff: Backoff(baseMilliseconds: 5000, maxMilliseconds: 5000))
        let changes = try listen(config)
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil(6000) { changes.count == 1 }, "the poll after the Retry-After brings the config")
        let polls = try requests(since: seq, path: "/config")
        XCTAssertGreaterThanOrEqual(polls.count, 2)
        guard polls.count >= 2 else { return }
        XCTAssertEqual(polls[0]["status"]?.intValue, 429)
        XCTAssertGreaterThanOrEqual(polls[1]["time_ms"]?.intValue ?? 0, answered(polls[0]) + 1000 - 2,
                                    "the second poll came before the Retry-After passed")
        XCTAssertEqual(try requests(since: seq, path: "/config/stream").count, 1, "the stream waits for its backoff")
    }

    func testLastFetchStatusReportsNetworkAndServerErrors() throws {
        let config = try open()
        XCTAssertEqual(config.lastFetchStatus, .none)
        try TestServer.post("/admin/faults", #"{"path_prefix":"/v1/apps/\#(app)/config","status":503}"#)
        XCTAssertThrowsError(try config.refresh())
        XCTAssertEqual(config.lastFetchStatus.error?.httpStatus, 503)
        try TestServer.offline { XCTAssertThrowsError(try config.refresh()) }
        guard case .network? = config.lastFetchStatus.error else { return XCTFail("\(config.lastFetchStatus)") }
    }
}
