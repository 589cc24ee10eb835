import XCTest
import Glibc
import Synchronization
@testable import AppNorthCore

/// What the event-queue tests share: a fresh server and data folder per
/// test, quiet options, and readers of what the server stored.
class EventsTestCase: XCTestCase {
    var folder = ""
    /// The app the events go to. A test class whose tests hard-code no app
    /// may use a fresh one per test (`isolatedApp`): an upload that a
    /// previous test's handle still had in flight on a loaded machine then
    /// lands in that test's app, not in this test's counts.
    var app = "swift"
    class var isolatedApp: Bool { false }

    override func setUp() async throws {
        try TestServer.reset()
        if Self.isolatedApp { app = "swift-\(Random.hexToken(bytes: 4))" }
        folder = "/tmp/appnorth-events-\(getpid())-\(Random.hexToken(bytes: 4))"
    }

    /// Threads a test started; joined at its end, so that none outlives it.
    var threads: [BackgroundThread] = []

    /// Starts a thread that is joined when the test ends.
    func spawn(_ name: String, _ body: @escaping @Sendable (BackgroundThread) -> Void) throws {
        threads.append(try BackgroundThread(name: name, body: body))
    }

    override func tearDown() {
        for thread in threads { thread.stop() }
        threads = []
        _ = system("rm -rf '\(folder)'")
    }

    /// Options for tests: no timer flushes unless asked, fast retries.
    func quiet(_ change: (inout AppNorthEventsOptions) -> Void = { _ in }) -> AppNorthEventsOptions {
        var o = AppNorthEventsOptions()
        o.flushIntervalMilliseconds = 3_600_000
        o.batchThreshold = 10_000
        o.retry.baseMilliseconds = 10
        change(&o)
        return o
    }

    func open(_ options: AppNorthEventsOptions, client: AppNorthClient? = nil,
              secure: (any AppNorthSecureStore)? = nil, logger: Logger? = nil) throws -> AppNorthEvents {
        try AppNorthEvents(client: client ?? TestServer.client(app: app), directory: DataDirectory(path: folder),
                           options: options, secureStore: secure, logger: logger)
    }

    /// The paths of the event journal files in the data folder.
    func journalFiles() -> [String] {
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var paths: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(EventJournal.prefix) && name.hasSuffix(EventJournal.suffix) { paths.append(folder + "/" + name) }
        }
        return paths.sorted()
    }

    func readFile(_ path: String) throws -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY)
        guard fd >= 0 else { throw AppNorthError.storage("cannot open \(path)") }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw AppNorthError.storage("cannot read \(path)") }
            if n == 0 { return out }
            out += chunk[..<n]
        }
    }

    func writeFile(_ path: String, _ bytes: [UInt8]) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        bytes.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// A journal an ended process left (`bytes`: two whole records and a
    /// torn one) at `name` in the data directory: the next open imports
    /// the two, counts the torn one as damaged, removes the file and
    /// uploads the two at once.
    func assertLeftJournalIsImported(_ bytes: [UInt8], name: String,
                                     file: StaticString = #filePath, line: UInt = #line) throws {
        _ = try DataDirectory(path: folder)
        let left = folder + "/" + name
        writeFile(left, bytes)
        let events = try open(quiet())
        XCTAssertEqual(events.queuedCount, 2, file: file, line: line)
        XCTAssertFalse(journalFiles().contains(left), "the imported journal is removed", file: file, line: line)
        XCTAssertTrue(eventually { (try? serverEvents().count) == 2 }, "uploaded at once after the open", file: file, line: line)
        XCTAssertEqual(try JSON.parse(events.statsJSON())["dropped"]?["damaged"]?.intValue, 1, file: file, line: line)
        events.close(timeoutMilliseconds: 0)
    }

    func serverEvents() throws -> [JSON] {
        try TestServer.get("/admin/apps/\(app)/state")["events"]?.arrayElements ?? []
    }

    /// The event uploads of the "swift" app. The server logs a request
    /// just after answering it, so a count read right after a flush is
    /// read again until it settles.
    func eventPosts() throws -> Int {
        func read() throws -> Int {
            try (TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
                $0["method"]?.stringValue == "POST" && $0["path"]?.stringValue == "/v1/apps/\(app)/events"
            }.count
        }
        var count = try read()
        for _ in 0..<50 {
            sleepMilliseconds(10)
            let again = try read()
            if again == count { break }
            count = again
        }
        return count
    }

    /// Polls until `condition` holds or 5 s pass.
    func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
        for _ in 0..<250 {
            if try condition() { return true }
            sleepMilliseconds(20)
        }
        return false
    }

    /// Answers the next `count` event uploads with `status`.
    func failEventPosts(count: Int, status: Int = 503) throws {
        try TestServer.post("/admin/faults", #"{"status":\#(status),"count":\#(count),"path_prefix":"/v1/apps/\#(app)/events"}"#)
    }

    /// Set once by another thread.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }

    /// Runs `flush` on another thread; the flag is set when it returns.
    func flushInBackground(_ events: AppNorthEvents, timeoutMilliseconds: Int = 30_000) throws -> Flag {
        let done = Flag()
        try spawn("flusher") { _ in
            _ = try? events.flush(timeoutMilliseconds: timeoutMilliseconds)
            done.set()
        }
        return done
    }
}
