import XCTest
import Glibc
@testable import AppNorthCore

/// Issue 23, class 1 (same user): the data directory is opened once and
/// checked, and no file planted in it (a link, a FIFO, a hard link) is
/// followed or adopted. The other-user cases (a second uid, when the tests
/// run as root) are in bindings/python/tests/test_security.py.
final class DataDirectorySecurityTests: XCTestCase {
    var folder = ""
    /// A file of the user's that no planted link may change.
    var victim = ""

    override func setUp() {
        folder = "/tmp/appnorth-sec-\(getpid())-\(Random.hexToken(bytes: 4))"
        mkdir(folder, 0o700)
        victim = folder + "/victim"
        write(victim, "precious")
        chmod(victim, 0o644)
    }

    override func tearDown() { _ = system("rm -rf '\(folder)'") }

    private func write(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
    }

    private func contents(_ path: String) -> String {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = read(fd, &buffer, 256)
        return String(decoding: buffer.prefix(max(0, n)), as: UTF8.self)
    }

    private func mode(_ path: String) -> UInt32 {
        var info = stat()
        XCTAssertEqual(lstat(path, &info), 0, path)
        return UInt32(info.st_mode) & 0o7777
    }

    private func assertVictimUntouched(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(contents(victim), "precious", file: file, line: line)
        XCTAssertEqual(mode(victim), 0o644, file: file, line: line)
    }

    private func assertUnsafe(_ body: () throws -> Void, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), what, file: file, line: line) { error in
            guard case AppNorthError.storage(let message) = error, message.contains("unsafe") else {
                return XCTFail("\(what): \(error)", file: file, line: line)
            }
        }
    }

    func testASymlinkedDataDirectoryIsRefusedAndItsTargetKept() {
        let elsewhere = folder + "/elsewhere"
        mkdir(elsewhere, 0o755)
        symlink(elsewhere, folder + "/data")
        assertUnsafe({ _ = try DataDirectory(path: self.folder + "/data") }, "symlinked directory")
        XCTAssertEqual(mode(elsewhere), 0o755, "the link's target was not chmodded")
    }

    func testAWritableDirectoryIsRefusedAndAReadableOneOfOursTightened() throws {
        let open = folder + "/wide"
        mkdir(open, 0o700)
        chmod(open, 0o777)
        assertUnsafe({ _ = try DataDirectory(path: open) }, "0777 directory")
        chmod(open, 0o770)
        assertUnsafe({ _ = try DataDirectory(path: open) }, "group-writable directory")
        // An older version's folder, or a host umask: readable, ours.
        let older = folder + "/older"
        mkdir(older, 0o700)
        chmod(older, 0o755)
        _ = try DataDirectory(path: older)
        XCTAssertEqual(mode(older), 0o700)
    }

    func testTheDescriptorOutlivesASwapOfThePath() throws {
        let path = folder + "/data"
        let directory = try DataDirectory(path: path)
        let store = try FileSecureStore(directory: directory)
        // The path now names another folder, with a planted link in it.
        XCTAssertEqual(rename(path, folder + "/moved"), 0)
        mkdir(path, 0o700)
        symlink(victim, path + "/identity.json")
        try store.write("user_id", "u1")
        assertVictimUntouched()
        XCTAssertEqual(try FileSecureStore(directory: DataDirectory(path: folder + "/moved")).read("user_id"), "u1")
    }

    func testPlantedLinksAreNeverFollowed() throws {
        for name in ["identity.json.lock", "identity.json", "consent.watch", "appnorth.sqlite3",
                     "appnorth.sqlite3-wal", "appnorth.sqlite3-shm", "appnorth.sqlite3-journal"] {
            let path = folder + "/d-" + name
            let directory = try DataDirectory(path: path)
            symlink(victim, path + "/" + name)
            switch name {
            case "consent.watch": assertUnsafe({ _ = try ConsentWatch(directory: directory) }, name)
            case let n where n.hasPrefix("appnorth"): assertUnsafe({ _ = try SQLiteStore(directory: directory) }, name)
            default: assertUnsafe({ _ = try FileSecureStore(directory: directory) }, name)
            }
            assertVictimUntouched()
        }
    }

    func testAPlantedTemporaryNameOfTheIdentityStoreIsNotWrittenThrough() throws {
        let directory = try DataDirectory(path: folder + "/data")
        let store = try FileSecureStore(directory: directory)
        // The names the 0.3 store used (pid-based), and a guess of ours.
        symlink(victim, folder + "/data/identity.json.tmp-\(getpid())")
        symlink(victim, folder + "/data/identity.json.tmp")
        try store.write("anonymous_id", "a")
        assertVictimUntouched()
        XCTAssertEqual(try store.read("anonymous_id"), "a")
        XCTAssertEqual(mode(folder + "/data/identity.json"), 0o600)
    }

    func testAHardLinkedOrNonRegularFileIsNotAdopted() throws {
        let directory = try DataDirectory(path: folder + "/data")
        XCTAssertEqual(link(victim, folder + "/data/identity.json"), 0)
        assertUnsafe({ _ = try FileSecureStore(directory: directory) }, "hard link")
        unlink(folder + "/data/identity.json")
        XCTAssertEqual(mkfifo(folder + "/data/consent.watch", 0o600), 0)
        assertUnsafe({ _ = try ConsentWatch(directory: directory) }, "FIFO (and no hang)")
        assertVictimUntouched()
    }

    func testAPlantedJournalLinkOrFIFOIsNeverImported() throws {
        let directory = try DataDirectory(path: folder + "/data")
        symlink(victim, folder + "/data/events-1-r0-00.journal")
        mkfifo(folder + "/data/events-2-r0-00.journal", 0o600)
        XCTAssertNil(EventJournal.claimOrphan("events-1-r0-00.journal", in: directory, logger: .silent))
        XCTAssertNil(EventJournal.claimOrphan("events-2-r0-00.journal", in: directory, logger: .silent))
        assertVictimUntouched()
    }

    func testSQLiteFilesStayInTheHeldFolder() throws {
        let directory = try DataDirectory(path: folder + "/data")
        let store = try SQLiteStore(directory: directory)
        try store.kvPut(namespace: "n", key: "k", value: [1], updatedMs: 1)
        XCTAssertFalse(store.path.contains("//"))
        XCTAssertEqual(mode(folder + "/data/appnorth.sqlite3"), 0o600)
        XCTAssertEqual(mode(folder + "/data/appnorth.sqlite3-wal"), 0o600)
    }
}

/// Issue 23, class 3: a credential never goes in clear text to a host that
/// is not loopback unless the host is named.
final class CleartextTests: XCTestCase {
    private let credential = AppNorthCredential(email: "a@b.c", token: "t0k")

    func testACredentialOnHTTPToANetworkHostIsRefused() {
        for url in ["http://api.example.com", "HTTP://10.0.0.5:8080/x", "http://user@evil.example", "http://[2001:db8::1]:80"] {
            XCTAssertThrowsError(try AppNorthClientConfiguration(apiURL: url, appID: "a", credential: credential), url) {
                guard case AppNorthError.invalidArgument(let m) = $0, m.contains("clear text") else { return XCTFail("\($0)") }
            }
        }
        // Without a credential, and over https, nothing is refused.
        XCTAssertNoThrow(try AppNorthClientConfiguration(apiURL: "http://api.example.com", appID: "a"))
        XCTAssertNoThrow(try AppNorthClientConfiguration(apiURL: "https://api.example.com", appID: "a", credential: credential))
    }

    func testLoopbackIsAllowedAndANamedHostWithAWarning() throws {
        for url in ["http://127.0.0.1:1", "http://localhost", "http://dev.localhost:9", "http://[::1]:8080", "http://127.1.2.3"] {
            XCTAssertNoThrow(try AppNorthClientConfiguration(apiURL: url, appID: "a", credential: credential), url)
        }
        XCTAssertThrowsError(try AppNorthClientConfiguration(apiURL: "http://127.0.0.1.evil.example", appID: "a", credential: credential))
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .debug, sink: { _, line in lines.withLock { $0.append(line) } })
        _ = try AppNorthClientConfiguration(apiURL: "http://Staging.Internal:8080", appID: "a", credential: credential,
                                            logger: logger, allowCleartextHosts: [try Cleartext.validatedHost("staging.internal")])
        XCTAssertTrue(lines.withLock { $0 }.contains { $0.contains("clear text to staging.internal") }, "\(lines.withLock { $0 })")
        XCTAssertEqual(try Cleartext.validatedHost("::1"), "[::1]")
        XCTAssertThrowsError(try Cleartext.validatedHost("http://x"))
        XCTAssertThrowsError(try Cleartext.validatedHost("x/y"))
        XCTAssertThrowsError(try Cleartext.validatedHost("host:8080"))
        XCTAssertEqual(try Cleartext.validatedHost("[2001:DB8::1]"), "[2001:db8::1]")
        XCTAssertThrowsError(try Cleartext.validatedHost(""))
    }

    func testDotSegmentsAreNotAppIDs() {
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedAppID("."))
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedAppID(".."))
        XCTAssertNoThrow(try AppNorthClientConfiguration.validatedAppID("...a"))
    }
}
