import XCTest
import Glibc
@testable import AppNorth

final class SQLiteStoreTests: XCTestCase {
    var folder = ""

    override func setUp() {
        folder = "/tmp/appnorth-tests-\(getpid())-\(Random.hexToken(bytes: 4))"
    }

    override func tearDown() {
        _ = system("rm -rf '\(folder)'")
    }

    private func mode(_ path: String) -> UInt32 {
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0, path)
        return UInt32(info.st_mode) & 0o777
    }

    func testDataDirectoryIs0700AndFilesAre0600() throws {
        let umaskBefore = umask(0o022)
        defer { umask(umaskBefore) }
        let directory = try DataDirectory(path: folder + "/nested/data/")
        XCTAssertEqual(directory.path, folder + "/nested/data")
        let store = try SQLiteStore(directory: directory)
        try store.kvPut(namespace: "n", key: "k", value: [1], updatedMs: 1)
        XCTAssertEqual(mode(directory.path), 0o700)
        XCTAssertEqual(mode(store.path), 0o600)
        XCTAssertEqual(mode(store.path + "-wal"), 0o600)
    }

    func testWALModeAndSchemaVersion() throws {
        let store = try SQLiteStore(directory: DataDirectory(path: folder))
        let mode = try store.withConnection { conn throws(AppNorthError) in
            try conn.query("PRAGMA journal_mode") { $0.text(0) }.first
        }
        XCTAssertEqual(mode, "wal")
        XCTAssertEqual(store.userVersion, SQLiteStore.schemaVersion)
        XCTAssertGreaterThanOrEqual(SQLiteStore.schemaVersion, 1)
    }

    func testValuesSurviveReopen() throws {
        let directory = try DataDirectory(path: folder)
        do {
            let store = try SQLiteStore(directory: directory)
            try store.kvPut(namespace: "cfg", key: "doc", value: Array("hello".utf8), updatedMs: 7)
            try store.kvPut(namespace: "cfg", key: "doc", value: Array("again".utf8), updatedMs: 8)
        }
        let reopened = try SQLiteStore(directory: directory)
        let row = try reopened.kvGet(namespace: "cfg", key: "doc")
        XCTAssertEqual(row.map { String(decoding: $0.value, as: UTF8.self) }, "again")
        XCTAssertEqual(row?.updatedMs, 8)
        try reopened.kvDelete(namespace: "cfg", key: "doc")
        XCTAssertNil(try reopened.kvGet(namespace: "cfg", key: "doc"))
    }

    func testRefusesADatabaseFromANewerLibrary() throws {
        let directory = try DataDirectory(path: folder)
        do {
            let store = try SQLiteStore(directory: directory)
            try store.withConnection { conn throws(AppNorthError) in
                try conn.exec("PRAGMA user_version = \(SQLiteStore.schemaVersion + 5)")
            }
        }
        XCTAssertThrowsError(try SQLiteStore(directory: directory)) { error in
            guard case AppNorthError.storage(let message) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("newer"), message)
        }
    }

    func testTransactionRollsBackOnError() throws {
        let store = try SQLiteStore(path: ":memory:")
        XCTAssertThrowsError(try store.transaction { conn throws(AppNorthError) in
            try conn.run("INSERT INTO kv VALUES ('n', 'k', x'01', 1)")
            throw AppNorthError.storage("boom")
        })
        XCTAssertNil(try store.kvGet(namespace: "n", key: "k"))
    }

    func testDataDirectoryErrors() {
        XCTAssertThrowsError(try DataDirectory(path: ""))
        XCTAssertThrowsError(try DataDirectory(path: "/proc/self/appnorth-cannot-exist"))
    }
}
