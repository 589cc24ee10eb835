/// The `kv` table's statements (schema: `Schema`), the only place that
/// spells them. Each runs on a connection the caller holds
/// (`SQLiteStore.withConnection` or inside a `transaction`); the
/// `SQLiteStore.kv*` methods take the connection for one statement.
extension SQLiteStore.Connection {
    /// The row's value and update time, nil without one.
    func kvRow(_ namespace: String, _ key: String) throws(AppNorthError) -> (value: [UInt8], updatedMs: Int64)? {
        try query("SELECT value, updated_ms FROM kv WHERE namespace = ? AND key = ?",
                  [.text(namespace), .text(key)]) { ($0.blob(0), $0.int64(1)) }.first
    }

    /// The row's value, nil without one.
    func kvValue(_ namespace: String, _ key: String) throws(AppNorthError) -> [UInt8]? {
        try query("SELECT value FROM kv WHERE namespace = ? AND key = ?",
                  [.text(namespace), .text(key)]) { $0.blob(0) }.first
    }

    /// Whether the row exists.
    func kvContains(_ namespace: String, _ key: String) throws(AppNorthError) -> Bool {
        try !query("SELECT 1 FROM kv WHERE namespace = ? AND key = ?",
                   [.text(namespace), .text(key)]) { $0.int(0) }.isEmpty
    }

    /// Inserts the row or replaces its value and update time.
    func kvPut(_ namespace: String, _ key: String, _ value: [UInt8], updatedMs: Int64) throws(AppNorthError) {
        try run("INSERT INTO kv (namespace, key, value, updated_ms) VALUES (?, ?, ?, ?) "
                + "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms",
                [.text(namespace), .text(key), .blob(value), .int(updatedMs)])
    }

    /// Replaces the value of an existing row, keeping its update time; no
    /// row is made. Returns the rows changed (0 or 1).
    @discardableResult
    func kvReplaceValue(_ namespace: String, _ key: String, _ value: [UInt8]) throws(AppNorthError) -> Int {
        try run("UPDATE kv SET value = ? WHERE namespace = ? AND key = ?", [.blob(value), .text(namespace), .text(key)])
    }

    /// Deletes the row; returns the rows deleted (0 or 1).
    @discardableResult
    func kvDelete(_ namespace: String, _ key: String) throws(AppNorthError) -> Int {
        try run("DELETE FROM kv WHERE namespace = ? AND key = ?", [.text(namespace), .text(key)])
    }

    /// Deletes the row and returns the value it held, nil without one.
    func kvTake(_ namespace: String, _ key: String) throws(AppNorthError) -> [UInt8]? {
        try take(from: "kv", where: "namespace = ? AND key = ?", [.text(namespace), .text(key)],
                 returning: "value") { $0.blob(0) }.first
    }

    /// The keys and values of a namespace's rows updated after `updatedMs`.
    func kvRows(_ namespace: String, updatedAfter updatedMs: Int64) throws(AppNorthError) -> [(key: String, value: [UInt8])] {
        try query("SELECT key, value FROM kv WHERE namespace = ? AND updated_ms > ?",
                  [.text(namespace), .int(updatedMs)]) { ($0.text(0), $0.blob(1)) }
    }

    /// The keys of a namespace's rows.
    func kvKeys(_ namespace: String) throws(AppNorthError) -> [String] {
        try query("SELECT key FROM kv WHERE namespace = ?", [.text(namespace)]) { $0.text(0) }
    }
}

extension SQLiteStore {
    package func kvGet(namespace: String, key: String) throws(AppNorthError) -> (value: [UInt8], updatedMs: Int64)? {
        try withConnection { conn throws(AppNorthError) in try conn.kvRow(namespace, key) }
    }

    package func kvPut(namespace: String, key: String, value: [UInt8], updatedMs: Int64) throws(AppNorthError) {
        try withConnection { conn throws(AppNorthError) in try conn.kvPut(namespace, key, value, updatedMs: updatedMs) }
    }

    package func kvDelete(namespace: String, key: String) throws(AppNorthError) {
        _ = try withConnection { conn throws(AppNorthError) in try conn.kvDelete(namespace, key) }
    }

    /// Reads a row, lets `change` compute its new value (nil deletes it),
    /// and writes it back, all in one write transaction: a concurrent
    /// writer, another handle or another process, waits instead of having
    /// its change overwritten. `change` must not call back into this store.
    package func kvUpdate<T>(namespace: String, key: String, updatedMs: Int64,
                            _ change: ([UInt8]?) throws -> (value: [UInt8]?, result: T)) throws -> T {
        var failure: (any Error)?
        do {
            return try transaction { conn throws(AppNorthError) -> T in
                let current = try conn.kvValue(namespace, key)
                let next: (value: [UInt8]?, result: T)
                do {
                    next = try change(current)
                } catch {
                    failure = error
                    throw .storage("update abandoned")  // rolls back; the caller sees `failure`
                }
                if let value = next.value {
                    try conn.kvPut(namespace, key, value, updatedMs: updatedMs)
                } else {
                    try conn.kvDelete(namespace, key)
                }
                return next.result
            }
        } catch {
            throw failure ?? error
        }
    }
}
