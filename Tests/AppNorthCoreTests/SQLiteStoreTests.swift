import XCTest
import Glibc
import Dispatch
@testable import AppNorthCore

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

    /// `take` stands in for `DELETE ... RETURNING` (SQLite 3.35+, the floor
    /// ships 3.34): it returns what it deleted, alone or inside a caller's
    /// transaction, and a rollback of that transaction keeps the rows.
    func testTakeReturnsTheDeletedRowsAloneAndInsideATransaction() throws {
        let store = try SQLiteStore(directory: DataDirectory(path: folder))
        for key in ["a", "b", "c"] { try store.kvPut(namespace: "n", key: key, value: Array(key.utf8), updatedMs: 1) }
        let alone = try store.withConnection { conn throws(AppNorthError) in
            try conn.take(from: "kv", where: "namespace = ? AND key = ?", [.text("n"), .text("a")], returning: "value") {
                $0.blob(0)
            }
        }
        XCTAssertEqual(alone, [Array("a".utf8)])
        XCTAssertNil(try store.kvGet(namespace: "n", key: "a"))
        XCTAssertThrowsError(try store.transaction { conn throws(AppNorthError) -> Void in
            let both = try conn.take(from: "kv", where: "namespace = ?", [.text("n")], returning: "key") { $0.text(0) }
            XCTAssertEqual(both.sorted(), ["b", "c"])
            throw AppNorthError.storage("roll back")
        })
        XCTAssertNotNil(try store.kvGet(namespace: "n", key: "b"), "a rolled-back take keeps its rows")
        let none = try store.withConnection { conn throws(AppNorthError) in
            try conn.take(from: "kv", where: "key = ?", [.text("zz")], returning: "key") { $0.text(0) }
        }
        XCTAssertEqual(none, [])
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

    /// Issue 10: connections opening one fresh file at once all succeed
    /// (one migrates, the others find the schema in place). The
    /// several-process version runs in bindings/python/tests/test_multiprocess.py.
    func testConcurrentFirstOpensOfAFreshFileAllSucceed() throws {
        for trial in 0..<10 {
            let directory = try DataDirectory(path: folder + "/trial\(trial)")
            let failures = Lock<[String]>([], level: LockClass.test)
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let store = try SQLiteStore(directory: directory)
                    XCTAssertEqual(store.userVersion, SQLiteStore.schemaVersion)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            XCTAssertEqual(failures.withLock { $0 }, [], "trial \(trial)")
        }
    }

    /// kvUpdate is a read-modify-write in one transaction: two stores on
    /// one file incrementing one counter from two threads lose no step.
    func testKVUpdateFromTwoConnectionsLosesNoChange() throws {
        let directory = try DataDirectory(path: folder)
        let stores = [try SQLiteStore(directory: directory), try SQLiteStore(directory: directory)]
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            for _ in 0..<100 {
                do {
                    try stores[index].kvUpdate(namespace: "n", key: "counter", updatedMs: 1) { old in
                        let next = (old.flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0) + 1
                        return (Array(String(next).utf8), ())
                    }
                } catch {
                    XCTFail("\(error)")
                }
            }
        }
        let value = try stores[0].kvGet(namespace: "n", key: "counter")?.value ?? []
        XCTAssertEqual(String(decoding: value, as: UTF8.self), "200")
    }

    /// An error thrown by the change leaves the row as it was and reaches
    /// the caller unchanged.
    func testKVUpdateErrorRollsBack() throws {
        struct Refused: Error {}
        let store = try SQLiteStore(directory: DataDirectory(path: folder))
        try store.kvPut(namespace: "n", key: "k", value: [1], updatedMs: 1)
        XCTAssertThrowsError(try store.kvUpdate(namespace: "n", key: "k", updatedMs: 2) { _ -> ([UInt8]?, Void) in
            throw Refused()
        }) { XCTAssertTrue($0 is Refused, "\($0)") }
        XCTAssertEqual(try store.kvGet(namespace: "n", key: "k")?.value, [1])
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
