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
