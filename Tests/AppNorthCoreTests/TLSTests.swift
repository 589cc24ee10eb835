import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// HTTPS end to end and the transport's trust options, against the servers
/// `DEVSERVER_TLS=1 scripts/with-devserver.sh` starts: an HTTPS dev server
/// (HTTP/1.1 only) with a certificate from a throwaway CA, an HTTP/2 front
/// (devserver/h2front) for the plain dev server, listeners with bad
/// certificates and a forward proxy that logs what it forwards.
final class TLSTests: XCTestCase {
    let app = "swift-tls"
    let otherPin = "sha256//" + String(repeating: "A", count: 43) + "="
    var tlsURL = "", caFile = "", pin = "", proxyURL = "", proxyLog = ""
    var h2URL = "", h2Log = ""
    /// Where `admin` goes: the HTTPS dev server, or the h2 front.
    var adminURL = ""
    var folder = ""

    override func setUp() async throws {
        guard let tls = getenvString("APPNORTH_TEST_TLS_SERVER"), let ca = getenvString("APPNORTH_TEST_TLS_CA"),
              let pin = getenvString("APPNORTH_TEST_TLS_PIN"), let proxy = getenvString("APPNORTH_TEST_PROXY"),
              let log = getenvString("APPNORTH_TEST_PROXY_LOG"), let h2 = getenvString("APPNORTH_TEST_H2_SERVER"),
              let h2Log = getenvString("APPNORTH_TEST_H2_LOG") else {
            throw XCTSkip("TLS servers not running: use `make test-swift` (DEVSERVER_TLS=1)")
        }
        (tlsURL, caFile, self.pin, proxyURL, proxyLog) = (tls, ca, pin, proxy, log)
        (h2URL, self.h2Log, adminURL) = (h2, h2Log, tls)
        folder = "/tmp/appnorth-tls-\(getpid())-\(Random.hexToken(bytes: 4))"
        try admin(.post, "/admin/reset")
        try TestServer.reset()
    }

    override func tearDown() {
        if !folder.isEmpty { _ = system("rm -rf '\(folder)'") }
    }

    // MARK: Helpers

    /// An admin call on the HTTPS server (or the h2 front), trusting the test CA.
    @discardableResult
    func admin(_ method: HTTPRequest.Method, _ path: String, _ body: String = "{}") throws -> JSON {
        let transport = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 15_000), trust: HTTPTrust(caFile: caFile))
        let response = try transport.perform(HTTPRequest(method: method, url: adminURL + path,
                                                         headers: [("Content-Type", "application/json")],
                                                         body: method == .get ? nil : Array(body.utf8)))
        XCTAssertTrue(response.isSuccess, "admin \(method) \(path) -> \(response.status)")
        return try JSON.parse(response.body)
    }

    func client(_ url: String, _ trust: HTTPTrust) throws -> AppNorthClient {
        AppNorthClient(configuration: try AppNorthClientConfiguration(
            apiURL: url, appID: app,
            timeouts: HTTPTimeouts(apiRequestMilliseconds: 15_000, resourceDownloadMilliseconds: 15_000), trust: trust))
    }

    func waitUntil(seconds: Int = 15, _ condition: () throws -> Bool) rethrows -> Bool {
        let clock = SystemClock()
        let deadline = clock.monotonicNanoseconds() + UInt64(seconds) * 1_000_000_000
        while clock.monotonicNanoseconds() < deadline {
            if try condition() { return true }
            sleepMilliseconds(10)
        }
        return try condition()
    }

    final class Themes: Sendable {
        private let seen = Mutex<[String]>([])
        func record(_ change: ConfigChange) {
            let theme = (try? JSON.parse(Array(change.config.utf8)))?["theme"]?.stringValue ?? ""
            seen.withLock { $0.append(theme) }
        }
        func contains(_ theme: String) -> Bool { seen.withLock { $0.contains(theme) } }
    }

    func proxyLogLines() -> [String] { logLines(proxyLog) }

    func logLines(_ path: String) -> [String] {
        guard let file = fopen(path, "r") else { return [] }
        defer { fclose(file) }
        var lines: [String] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        while fgets(&buffer, Int32(buffer.count), file) != nil {
            lines.append(String(cString: buffer).trimmingSuffixNewline())
        }
        return lines
    }

    // MARK: HTTPS end to end

    func testReadsWritesEventsConfigAndStreamOverHTTPS() throws {
        let pem = try XCTUnwrap(readAll(caFile))
        try runScenario(try client(tlsURL, HTTPTrust(caPEM: pem, pinnedPublicKeys: "\(otherPin);\(pin)")))
    }

    /// The same scenario through the HTTP/2 front: every request, the
    /// stream included, arrives at the front over HTTP/2.
    func testReadsWritesEventsConfigAndStreamOverHTTP2() throws {
        adminURL = h2URL
        try admin(.post, "/admin/reset")
        let seenBefore = logLines(h2Log).count
        try runScenario(try client(h2URL, HTTPTrust(caFile: caFile)))
        let seen = logLines(h2Log).dropFirst(seenBefore).filter { $0.contains(" /v1/apps/\(app)/") }
        for path in ["GET /v1/apps/\(app)/boards", "POST /v1/apps/\(app)/ideas", "POST /v1/apps/\(app)/events",
                     "GET /v1/apps/\(app)/config", "GET /v1/apps/\(app)/config/stream"] {
            XCTAssertTrue(seen.contains { $0.hasPrefix("HTTP/2.0 \(path) ") }, "\(path) over HTTP/2 in \(seen)")
        }
        XCTAssertFalse(seen.contains { !$0.hasPrefix("HTTP/2.0 ") }, "only HTTP/2 at the front: \(seen)")
    }

    /// What the client itself saw: h2 from the front, HTTP/1.1 (the ALPN
    /// fallback) from the HTTP/1.1-only HTTPS dev server and over plain http.
    func testTheNegotiatedProtocolIsReported() throws {
        let transport = HTTPTransport(timeouts: HTTPTimeouts(apiRequestMilliseconds: 15_000), trust: HTTPTrust(caFile: caFile))
        let path = "/v1/apps/\(app)/boards"
        XCTAssertEqual(try transport.perform(HTTPRequest(method: .get, url: h2URL + path)).protocolName, "HTTP/2")
        XCTAssertEqual(try transport.perform(HTTPRequest(method: .get, url: tlsURL + path)).protocolName, "HTTP/1.1")
        XCTAssertEqual(try transport.perform(HTTPRequest(method: .get, url: try TestServer.url() + path)).protocolName,
                       "HTTP/1.1")
        XCTAssertEqual(HTTPResponse.protocolName(curlVersion: 3), "HTTP/2")
        XCTAssertEqual(HTTPResponse.protocolName(curlVersion: 12345), "")
    }

    /// Reads, a queued write and its flush, an event batch, a config fetch
    /// and the live stream, through `client` against `adminURL`'s server.
    func runScenario(_ client: AppNorthClient) throws {
        let board = (try admin(.post, "/admin/apps/\(app)/boards", #"{"name":"Features","description":"d"}"#)["board"])?["id"]?.stringValue ?? ""

        XCTAssertTrue(try client.listBoards().contains("Features"))

        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        try admin(.post, "/admin/faults", #"{"drop":true,"count":50}"#)
        XCTAssertFalse(try queue.submitIdea(using: client, boardID: board, title: "Queued over TLS"))
        try admin(.delete, "/admin/faults")
        XCTAssertEqual(try queue.flush(using: client), 1)
        XCTAssertEqual(try queue.pendingCount(), 0)
        XCTAssertEqual(try admin(.get, "/admin/apps/\(app)/state")["ideas"]?.arrayElements.count, 1)

        var options = AppNorthEventsOptions()
        options.flushIntervalMilliseconds = 3_600_000
        options.batchThreshold = 10_000
        let events = try AppNorthEvents(client: client, directory: DataDirectory(path: folder + "/events"), options: options)
        XCTAssertTrue(try events.track("opened"))
        XCTAssertTrue(try events.track("closed"))
        XCTAssertEqual(try events.flush(timeoutMilliseconds: 15_000), 2)
        events.close(timeoutMilliseconds: 0)
        XCTAssertEqual(try admin(.get, "/admin/apps/\(app)/state")["events"]?.arrayElements.count, 2)

        try admin(.post, "/admin/apps/\(app)/config", #"{"config":{"theme":"dark"}}"#)
        let config = try AppNorthRemoteConfig(client: client, options: AppNorthRemoteConfig.Options(
            dataDirectory: folder + "/config", reconnectBackoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 200)))
        defer { config.close() }
        try config.refresh()
        XCTAssertEqual(config.string("theme", default: nil), "dark")
        let themes = Themes()
        _ = try config.addListener { themes.record($0) }
        try config.startLiveUpdates()
        XCTAssertTrue(try waitUntil {
            try admin(.get, "/admin/requests")["requests"]?.arrayElements
                .contains { $0["path"]?.stringValue == "/v1/apps/\(app)/config/stream" } ?? false
        }, "the stream connected")
        try admin(.post, "/admin/apps/\(app)/config", #"{"config":{"theme":"light"}}"#)
        XCTAssertTrue(waitUntil { themes.contains("light") }, "the stream delivered the update")
    }

    // MARK: Must fail

    /// A read fails with .network naming `reason`; a queued write stays queued.
    func assertRefused(_ url: String, _ trust: HTTPTrust, _ reason: String, line: UInt = #line) throws {
        let client = try client(url, trust)
        do {
            _ = try client.listBoards()
            XCTFail("\(url) was accepted", line: line)
        } catch {
            guard case .network = error else { return XCTFail("\(error)", line: line) }
            XCTAssertTrue(error.message.contains(reason), "\(error.message) lacks \"\(reason)\"", line: line)
        }
        let queue = try AppNorthOfflineQueue(storage: MemoryStorage())
        XCTAssertFalse(try queue.submitIdea(using: client, boardID: "b-1", title: "Never sent"), line: line)
        XCTAssertEqual(try queue.flush(using: client), 0, line: line)
        XCTAssertEqual(try queue.pendingCount(), 1, "nothing dequeued", line: line)
    }

    func testBadCertificatesAndPinsAreRefused() throws {
        let bad = { (name: String) in getenvString("APPNORTH_TEST_TLS_\(name)") ?? "https://127.0.0.1:1" }
        // Trusting only an unrelated certificate: the server's CA is unknown.
        // (Not the system store, whose presence varies between machines.)
        let otherCA = String(caFile[..<(caFile.lastIndex(of: "/") ?? caFile.endIndex)]) + "/selfsigned.pem"
        try assertRefused(tlsURL, HTTPTrust(caFile: otherCA), "unable to get local issuer certificate")
        try assertRefused(bad("SELF_SIGNED"), HTTPTrust(caFile: caFile), "self-signed certificate")
        try assertRefused(bad("WRONG_HOST"), HTTPTrust(caFile: caFile), "no alternative certificate subject name")
        try assertRefused(bad("EXPIRED"), HTTPTrust(caFile: caFile), "certificate has expired")
        try assertRefused(tlsURL, HTTPTrust(caFile: caFile, pinnedPublicKeys: otherPin), "pinned public key")
        XCTAssertEqual(try admin(.get, "/admin/requests")["requests"]?.arrayElements.count, 0,
                       "no request got past a refused handshake")
    }

    // MARK: Proxy

    func testRequestsAndTheConfigStreamGoThroughTheProxy() throws {
        let plain = try TestServer.url()
        try TestServer.post("/admin/apps/\(app)/config", #"{"config":{"theme":"proxied"}}"#)
        let client = try client(plain, HTTPTrust(proxyURL: proxyURL, ignoreProxyEnvironment: true))
        _ = try client.listBoards()
        let config = try AppNorthRemoteConfig(client: client, options: AppNorthRemoteConfig.Options(
            dataDirectory: folder + "/config", reconnectBackoff: Backoff(baseMilliseconds: 20, maxMilliseconds: 200)))
        defer { config.close() }
        let themes = Themes()
        _ = try config.addListener { themes.record($0) }
        try config.startLiveUpdates()
        XCTAssertTrue(waitUntil { themes.contains("proxied") }, "config over the proxied stream")
        let lines = proxyLogLines()
        XCTAssertTrue(lines.contains("GET \(plain)/v1/apps/\(app)/boards"), "\(lines)")
        XCTAssertTrue(lines.contains("GET \(plain)/v1/apps/\(app)/config/stream"), "\(lines)")

        let secure = try self.client(tlsURL, HTTPTrust(caFile: caFile, proxyURL: proxyURL))
        _ = try secure.listBoards()
        XCTAssertTrue(proxyLogLines().contains("CONNECT \(tlsURL.dropFirst("https://".count))"))
    }

    // MARK: Validation

    func testTrustOptionsAreValidated() throws {
        XCTAssertEqual(try HTTPTrust.validatedPins(" \(pin) ; \(otherPin)"), "\(pin);\(otherPin)")
        XCTAssertThrowsError(try HTTPTrust.validatedPins("sha1//abc"))
        XCTAssertThrowsError(try HTTPTrust.validatedPins("sha256//short"))
        XCTAssertThrowsError(try HTTPTrust.validatedPins(""))
        XCTAssertThrowsError(try HTTPTrust.validatedPins(Array(repeating: otherPin, count: 65).joined(separator: ";")))
        XCTAssertThrowsError(try HTTPTrust.validatedCAPEM(Array("junk".utf8)))
        XCTAssertThrowsError(try HTTPTrust.validatedCAPEM([UInt8](repeating: 0x41, count: HTTPTrust.maxCABytes + 1)))
        XCTAssertThrowsError(try HTTPTrust.validatedCAFile(""))
        XCTAssertThrowsError(try HTTPTrust.validatedProxyURL("http://a b"))
        XCTAssertThrowsError(try HTTPTrust.validatedProxyURL("http://\u{e9}"))
        XCTAssertEqual(try HTTPTrust.validatedProxyURL("socks5h://127.0.0.1:1080"), "socks5h://127.0.0.1:1080")
    }

    private func readAll(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return bytes
    }
}

private extension String {
    func trimmingSuffixNewline() -> String {
        var text = self
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
