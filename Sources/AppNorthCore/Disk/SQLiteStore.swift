import CSQLite
import Glibc

/// One SQLite database in the data directory: WAL journal, a schema version
/// kept in `PRAGMA user_version`, and migrations applied in order at open.
///
/// Thread-safe: one connection, serialised by a mutex. Each component keeps
/// its statements short, so the lock is held for microseconds.
package final class SQLiteStore: Sendable {
    package static var schemaVersion: Int { Schema.migrations.count }

    private let connection: Lock<Connection>
    package let path: String

    /// Opens (creating if needed) `file` inside `directory`: a regular
    /// file of the effective uid (DataDirectory.adoptable), as are its
    /// -wal, -shm and -journal files when they exist. SQLite takes a path:
    /// it gets the folder's canonical one with SQLITE_OPEN_NOFOLLOW (no
    /// link anywhere in it; SQLite opens every file O_NOFOLLOW), and the
    /// file it opened is checked to be the one in the folder's descriptor.
    package convenience init(directory: DataDirectory, file: String = "appnorth.sqlite3") throws(AppNorthError) {
        let path = try directory.ensurePrivateFile(file)
        for suffix in ["-wal", "-shm", "-journal"] { try directory.refuseForeign(file + suffix) }
        try self.init(path: path)
        var opened = stat(), held = stat()
        guard lstat(path, &opened) == 0, fstatat(directory.fd, file, &held, AT_SYMLINK_NOFOLLOW) == 0,
              opened.st_dev == held.st_dev, opened.st_ino == held.st_ino else {
            throw .storage("unsafe data directory \(directory.path): it was moved while its database was opened")
        }
    }

    /// Opens a database at `path`; ":memory:" gives a private in-memory one.
    package init(path: String) throws(AppNorthError) {
        self.path = path
        var db: OpaquePointer?
        // NOMUTEX: the connection is only used under `connection`'s lock,
        // so SQLite's own per-call locking would be paid for nothing.
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
            | (path == ":memory:" ? 0 : SQLITE_OPEN_NOFOLLOW)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw .storage("cannot open database \(path): \(message)")
        }
        let conn = Connection(db)
        do throws(AppNorthError) {
            // Several processes may open one fresh directory at the same
            // moment: every step below waits for the others' locks.
            sqlite3_busy_timeout(db, Self.busyTimeoutMs)
            // Before the first table exists: a fresh file gives space back,
            // in the pages the queue's limits count by (RowCost).
            try conn.exec("PRAGMA page_size=\(Self.pageSize)")
            try conn.exec("PRAGMA auto_vacuum=INCREMENTAL")
            try Self.setWALJournal(conn)
            try conn.exec("PRAGMA synchronous=NORMAL")
            try conn.exec("PRAGMA foreign_keys=ON")
            // Not zeroing freed overflow pages (Debian's SQLite does by
            // default): a delivered batch of big events would write all its
            // pages into the WAL at once, 4 MB for a full queue (#32). Freed
            // pages go back to the file system when the queue empties
            // (`compact`), after a revocation of consent too.
            try conn.exec("PRAGMA secure_delete=FAST")
            // A page cache of 512 KiB, not SQLite's 2 MB: since a track
            // imports its journal into the table (the files' 5 MB), the
            // cache filled with a full queue's pages (bench_memory: +3.0 MB
            // of RSS with 10,000 queued, +0.77 MB before).
            try conn.exec("PRAGMA cache_size=-512")
            try Self.limitJournal(conn)
            try Self.migrate(conn)
            Self.enableIncrementalVacuum(conn)
        } catch {
            conn.close()
            throw error
        }
        connection = Lock(conn, level: LockClass.connection)
    }

    /// The WAL is checkpointed every 256 pages (1 MiB at 4 KiB pages, not
    /// SQLite's 1,000) and cut back to 1 MiB after a checkpoint, so that
    /// it never holds much more than one transaction beyond that; the
    /// event queue truncates it when it empties (`compact`), and makes it
    /// smaller while its files near their budget (`setWALPages`).
    static let walCheckpointPages = 256
    static let pageSize = 4096

    private static func limitJournal(_ conn: Connection) throws(AppNorthError) {
        try conn.exec("PRAGMA wal_autocheckpoint=\(walCheckpointPages)")
        try conn.exec("PRAGMA journal_size_limit=\(walCheckpointPages * pageSize)")
    }

    /// The WAL's checkpoint interval and size after one, in pages, for
    /// this connection (with it held); set only when it changes.
    /// `shared`: another connection writes beside this one (another handle
    /// or process), so a commit truncates the WAL once past `pages`
    /// (`capWAL`), not 64 pages later.
    package func setWALPages(_ pages: Int, shared: Bool = false, _ conn: Connection) throws(AppNorthError) {
        conn.walCap = shared ? pages : pages + 64
        guard conn.walPages != pages else { return }
        try conn.exec("PRAGMA wal_autocheckpoint=\(pages)")
        try conn.exec("PRAGMA journal_size_limit=\(pages * Self.pageSize)")
        conn.walPages = pages
    }

    /// Truncates the WAL after a commit (or a `compact` step) that left it
    /// past its interval and 64 pages (`walPages`: 320 pages at the roomy
    /// 256, 128 at the tight 64), or past the interval alone while another
    /// connection writes (`setWALPages`). One connection's checkpoints keep
    /// it there. With several (handles or processes on one directory) each
    /// commit's automatic checkpoint met the other's, the WAL was never
    /// restarted and grew to 10 MB beside a full queue (#32: two handles
    /// tracking 10 KB events at once). SQLite never waits for another
    /// connection's checkpoint (it answers busy at once), so this tries
    /// again every millisecond, 50 times at most (1-46 tries measured).
    /// Costs one `lstat` per commit otherwise.
    private func capWAL(_ conn: Connection) {
        guard bytes(of: [path + "-wal"]) > conn.walCap * Self.pageSize else { return }
        for _ in 0..<50 {
            // (busy, WAL frames, frames checkpointed): -1 frames when another connection's checkpoint ran.
            let result = try? conn.query("PRAGMA wal_checkpoint(TRUNCATE)") { ($0.int(0), $0.int(1)) }.first
            guard let result, result.0 != 0, result.1 < 0 else { return }
            usleep(1000)
        }
    }

    /// A database made before incremental vacuum was set keeps its freed
    /// pages forever: it is rebuilt once (`VACUUM`) with the mode on. A
    /// failure (another process holds it) leaves it for the next open.
    private static func enableIncrementalVacuum(_ conn: Connection) {
        guard let mode = try? conn.query("PRAGMA auto_vacuum", [], { $0.int(0) }).first, mode != 2 else { return }
        try? conn.exec("PRAGMA auto_vacuum=INCREMENTAL")
        try? conn.exec("VACUUM")
    }

    /// Gives the file's free pages back to the file system and truncates
    /// the WAL (after the event queue emptied). Best effort: a reader in
    /// another process may keep part of the WAL until its next checkpoint.
    /// In steps of `stepPages`, each checkpointed, so the file shrinks as
    /// the WAL grows: one `incremental_vacuum` of a full queue's 1,140 free
    /// pages wrote 3.8 MB into the WAL beside the 4.6 MB file (#32).
    package func compact(stepPages: Int = walCheckpointPages) {
        _ = try? withConnection { conn throws(AppNorthError) in
            for _ in 0..<(1 << 16) {
                guard try conn.query("PRAGMA freelist_count", [], { $0.int(0) }).first ?? 0 > 0 else { break }
                try conn.exec("PRAGMA incremental_vacuum(\(max(1, stepPages)))")
                try conn.exec("PRAGMA wal_checkpoint(PASSIVE)")
                capWAL(conn)
            }
            try conn.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// Bytes of the database file and its WAL (lstat: a link planted there
    /// is measured, never followed).
    package var bytesOnDisk: Int { bytes(of: [path, path + "-wal"]) }
    /// Bytes of the database file alone: its free pages stay in it until
    /// the queue empties (`compact`).
    package var databaseBytes: Int { bytes(of: [path]) }

    private func bytes(of files: [String]) -> Int {
        var total = 0
        for file in files {
            var info = stat()
            if lstat(file, &info) == 0 { total += max(0, Int(info.st_size)) }
        }
        return total
    }

    /// How long a statement waits for another connection's lock (another
    /// handle or process on the same file) before failing as busy.
    static let busyTimeoutMs: Int32 = 5000

    deinit { connection.withLock { $0.close() } }

    /// Runs `body` with exclusive use of the connection.
    package func withConnection<T>(_ body: (Connection) throws(AppNorthError) -> T) throws(AppNorthError) -> T {
        try connection.withLock { conn throws(AppNorthError) -> T in try body(conn) }
    }

    /// Runs `body` inside one transaction; rolls back if it throws.
    package func transaction<T>(_ body: (Connection) throws(AppNorthError) -> T) throws(AppNorthError) -> T {
        try withConnection { conn throws(AppNorthError) -> T in
            try conn.exec("BEGIN IMMEDIATE")
            do throws(AppNorthError) {
                let result = try body(conn)
                try conn.exec("COMMIT")
                capWAL(conn)
                return result
            } catch {
                try? conn.exec("ROLLBACK")
                throw error
            }
        }
    }

    package var userVersion: Int {
        (try? withConnection { conn throws(AppNorthError) in
            try conn.query("PRAGMA user_version") { $0.int(0) }.first ?? 0
        }) ?? 0
    }

    /// Switching to WAL needs a moment of exclusive access, and SQLite
    /// may report "database is locked" for it without calling the busy
    /// handler while another process is doing the same. Retried for up to
    /// the busy timeout; once any connection has switched, the mode is
    /// persistent and the pragma is a no-op.
    private static func setWALJournal(_ conn: Connection) throws(AppNorthError) {
        var waitedMs: Int32 = 0
        while true {
            do throws(AppNorthError) {
                try conn.exec("PRAGMA journal_mode=WAL")
                return
            } catch {
                let code = sqlite3_errcode(conn.db) & 0xff
                guard code == SQLITE_BUSY || code == SQLITE_LOCKED, waitedMs < busyTimeoutMs else { throw error }
                usleep(10_000)
                waitedMs += 10
            }
        }
    }

    /// Applies the missing migrations in one write transaction. The schema
    /// version is read inside it, after the write lock is taken, so that of
    /// several processes opening a fresh directory at once exactly one
    /// migrates and the others find the work done.
    private static func migrate(_ conn: Connection) throws(AppNorthError) {
        try conn.exec("BEGIN IMMEDIATE")
        do throws(AppNorthError) {
            let current = try conn.query("PRAGMA user_version") { $0.int(0) }.first ?? 0
            // A damaged header can hold any 32-bit value; only 0...count are ours.
            guard current >= 0 else { throw .storage("database schema version \(current) is not valid: the file is damaged") }
            guard current <= Schema.migrations.count else {
                throw .storage("database schema version \(current) is newer than this library (\(Schema.migrations.count))")
            }
            for version in current..<Schema.migrations.count {
                try conn.exec(Schema.migrations[version])
            }
            if current < Schema.migrations.count {
                try conn.exec("PRAGMA user_version = \(Schema.migrations.count)")
            }
            try conn.exec("COMMIT")
        } catch {
            try? conn.exec("ROLLBACK")
            throw error
        }
    }

    // MARK: - Connection

    /// The connection and its values are their own types (Disk/SQLiteConnection.swift);
    /// these names keep the store's callers as they were.
    package typealias Value = SQLiteValue
    package typealias Connection = SQLiteConnection
    package typealias Row = SQLiteRow
}

extension LockClass {
    /// `SQLiteStore.connection`: one statement or transaction on the database; only leaves inside it.
    static let connection = LockClass(rank: 45, "SQLiteStore.connection")
}
