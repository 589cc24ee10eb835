import CSQLite

/// The SQLite connection behind `SQLiteStore` and the values and rows it
/// binds and reads: their own types, so the store (its files, WAL and
/// migrations) stays one owner of a readable size.
/// A value bound to a statement parameter.
package enum SQLiteValue: Sendable {
    case int(Int64), double(Double), text(String), blob([UInt8]), null
}

/// The raw connection. Only reachable inside `withConnection`, so it is
/// never used by two threads at once.
package final class SQLiteConnection: @unchecked Sendable {
    package typealias Value = SQLiteValue
    package typealias Row = SQLiteRow

    let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    /// The WAL's checkpoint interval set last (`setWALPages`).
    var walPages = SQLiteStore.walCheckpointPages
    /// Pages of WAL past which a commit truncates it (`capWAL`).
    var walCap = SQLiteStore.walCheckpointPages + 64

    init(_ db: OpaquePointer) { self.db = db }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close_v2(db)
    }

    var errorMessage: String { String(cString: sqlite3_errmsg(db)) }

    /// Runs one or more statements without parameters.
    package func exec(_ sql: String) throws(AppNorthError) {
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(message)
            throw .storage("SQLite: \(text)")
        }
    }

    /// Runs one statement; returns the number of changed rows.
    @discardableResult
    package func run(_ sql: String, _ values: [Value] = []) throws(AppNorthError) -> Int {
        let statement = try prepared(sql, values)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw .storage("SQLite: \(errorMessage)") }
        return Int(sqlite3_changes(db))
    }

    /// Runs a query and maps each row.
    package func query<T>(_ sql: String, _ values: [Value] = [], _ map: (Row) -> T) throws(AppNorthError) -> [T] {
        let statement = try prepared(sql, values)
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        var rows: [T] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw .storage("SQLite: \(errorMessage)") }
            rows.append(map(Row(statement: statement)))
        }
        return rows
    }

    /// `run` for a loop of thousands of rows of (text, blob, integer),
    /// as a journal import is: the statement is looked up once, and the
    /// text and blob are bound in place for the step (SQLITE_STATIC)
    /// instead of being copied by SQLite and boxed in `Value`s.
    package func rowInserter(_ sql: String) throws(AppNorthError) -> RowInserter {
        RowInserter(connection: self, statement: try prepared(sql, []))
    }

    package struct RowInserter {
        let connection: SQLiteConnection
        let statement: OpaquePointer

        /// Binds the three values, steps, resets; returns the rows changed.
        package func run(_ text: String, _ blob: [UInt8], _ integer: Int64) throws(AppNorthError) -> Int {
            var text = text
            let rc = text.withUTF8 { t in
                blob.withUnsafeBytes { b -> Int32 in
                    defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
                    // Bound SQLITE_STATIC (nil): valid only until the reset above.
                    // 64-bit length: no text, however long, reaches an Int32 conversion.
                    guard sqlite3_bind_text64(statement, 1, UnsafeRawPointer(t.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                                                  .assumingMemoryBound(to: CChar.self), sqlite3_uint64(t.count), nil,
                                              UInt8(SQLITE_UTF8)) == SQLITE_OK,
                          sqlite3_bind_blob64(statement, 2, b.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                              sqlite3_uint64(b.count), nil) == SQLITE_OK,
                          sqlite3_bind_int64(statement, 3, integer) == SQLITE_OK else { return SQLITE_MISUSE }
                    return sqlite3_step(statement)
                }
            }
            guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw .storage("SQLite: \(connection.errorMessage)") }
            return Int(sqlite3_changes(connection.db))
        }
    }

    /// Statements are prepared once and cached: the hot paths (event
    /// inserts) then only bind and step.
    private func prepared(_ sql: String, _ values: [Value]) throws(AppNorthError) -> OpaquePointer {
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var made: OpaquePointer?
            guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil) == SQLITE_OK,
                  let made else {
                throw .storage("SQLite: \(errorMessage)")
            }
            statements[sql] = made
            statement = made
        }
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch value {
            case .int(let v): rc = sqlite3_bind_int64(statement, position, v)
            case .double(let v): rc = sqlite3_bind_double(statement, position, v)
            case .text(let v): rc = sqlite3_bind_text(statement, position, v, -1, cshim_sqlite_transient())
            case .blob(let v):
                rc = v.withUnsafeBytes {
                    sqlite3_bind_blob64(statement, position, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                        sqlite3_uint64($0.count), cshim_sqlite_transient())
                }
            case .null: rc = sqlite3_bind_null(statement, position)
            }
            guard rc == SQLITE_OK else { throw .storage("SQLite bind: \(errorMessage)") }
        }
        return statement
    }
}

/// One result row, valid only inside the mapping closure.
package struct SQLiteRow {
    let statement: OpaquePointer
    package func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    package func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    package func text(_ column: Int32) -> String {
        guard let chars = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: chars, count: count), as: UTF8.self)
    }
    package func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}
