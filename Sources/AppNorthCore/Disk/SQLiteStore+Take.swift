import CSQLite

/// `DELETE ... RETURNING` without RETURNING: SQLite has it from 3.35, and the
/// platform floor (Debian 11, docs/platforms.md) ships 3.34, where the
/// statement fails to prepare. The rows' values are read and the rows deleted
/// in one write transaction, the caller's if one is open or else one of its
/// own, so no other connection changes them in between.
extension SQLiteConnection {
    /// Deletes the rows of `table` that `clause` selects and returns
    /// `column` of each, mapped; `values` bind the clause's parameters.
    package func take<T>(from table: String, where clause: String, _ values: [SQLiteStore.Value] = [],
                         returning column: String, _ map: (SQLiteStore.Row) -> T) throws(AppNorthError) -> [T] {
        let own = sqlite3_get_autocommit(db) != 0
        if own { try exec("BEGIN IMMEDIATE") }
        do throws(AppNorthError) {
            let taken = try query("SELECT \(column) FROM \(table) WHERE \(clause)", values, map)
            if !taken.isEmpty { try run("DELETE FROM \(table) WHERE \(clause)", values) }
            if own { try exec("COMMIT") }
            return taken
        } catch {
            if own { try? exec("ROLLBACK") }
            throw error
        }
    }
}
