/// The data directory's database schema: every table, and every namespace
/// of the `kv` table, in one place. `SQLiteStore` applies the migrations;
/// `KeyValue.swift` holds the only statements that touch `kv`.
enum Schema {
    /// Schema migrations. Entry N moves the schema from version N to N+1.
    /// Append only: never edit a migration that has shipped.
    static let migrations: [String] = [
        // 1: key/value rows for small documents (config cache, consent,
        // blobs of the pluggable queue and cache storage).
        """
        CREATE TABLE kv (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (namespace, key)
        );
        """,
        // 2: the analytics event queue. `seq` orders events oldest first;
        // `id` is the UUIDv7 the server deduplicates on; `payload` is the
        // event's JSON object exactly as it will be uploaded.
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            payload BLOB NOT NULL,
            bytes INTEGER NOT NULL
        );
        """,
        // 3: the event queue's totals, kept by triggers in the same
        // transaction as every insert and delete of `events`, whoever
        // makes it (another process, an older library): its rows and
        // their bytes in the files (`RowCost.bytes`, as SQL), and the
        // rows dropped past the limits (`QueueLimits.trim`). Filled once
        // from the rows already there.
        """
        CREATE TABLE events_totals (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            count INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            dropped INTEGER NOT NULL
        );
        INSERT INTO events_totals (id, count, bytes, dropped)
            SELECT 1, COUNT(*), COALESCE(SUM((SELECT 4096 / max(1, 4088 / (l + 11)) + (CASE WHEN r <= 4061 THEN 0 ELSE (r - l + 4091) / 4092 END) * 4096 + 48 FROM (SELECT r, CASE WHEN r <= 4061 THEN r WHEN 489 + (r - 489) % 4092 <= 4061 THEN 489 + (r - 489) % 4092 ELSE 489 END AS l FROM (SELECT length(payload) + 45 AS r)))), 0), 0 FROM events;
        CREATE TRIGGER events_totals_insert AFTER INSERT ON events BEGIN
            UPDATE events_totals SET count = count + 1, bytes = bytes + (SELECT 4096 / max(1, 4088 / (l + 11)) + (CASE WHEN r <= 4061 THEN 0 ELSE (r - l + 4091) / 4092 END) * 4096 + 48 FROM (SELECT r, CASE WHEN r <= 4061 THEN r WHEN 489 + (r - 489) % 4092 <= 4061 THEN 489 + (r - 489) % 4092 ELSE 489 END AS l FROM (SELECT length(NEW.payload) + 45 AS r))) WHERE id = 1;
        END;
        CREATE TRIGGER events_totals_delete AFTER DELETE ON events BEGIN
            UPDATE events_totals SET count = count - 1, bytes = bytes - (SELECT 4096 / max(1, 4088 / (l + 11)) + (CASE WHEN r <= 4061 THEN 0 ELSE (r - l + 4091) / 4092 END) * 4096 + 48 FROM (SELECT r, CASE WHEN r <= 4061 THEN r WHEN 489 + (r - 489) % 4092 <= 4061 THEN 489 + (r - 489) % 4092 ELSE 489 END AS l FROM (SELECT length(OLD.payload) + 45 AS r))) WHERE id = 1;
        END;
        """,
    ]

    /// The `kv` namespaces, each owned by one component.
    enum Namespace {
        /// SQLiteBlobStorage: the offline queue's and read cache's blobs, by storage name.
        static let blob = "blob"
        /// ConfigCache: cached remote config documents.
        static let config = "config"
        /// ConsentRecord: the analytics choice and the revocation count.
        static let consent = "consent"
        /// EventImporter: journals imported whole (empty value), by file name.
        static let journalImported = "events_journal_imported"
        /// EventImporter: how far a journal was imported (decimal offset).
        static let journalProgress = "events_journal_progress"
        /// EventStore (QueueLimits): each handle's leased batch range.
        static let eventsLease = "events_lease"
    }
}
