import Glibc
import Synchronization

/// Importing journal files into the table (a drain's retired segments, or
/// the journals ended processes left, `OrphanRecovery`): their records
/// merged oldest first, inserted with the files' marks in one transaction.
extension EventImporter {
    /// Imports up to `limit` events of journal files, oldest first (the
    /// files' next records merged by their timestamps: several stripes'
    /// files hold events of the same moments; within one file, the order
    /// written), and deletes the files imported to their end. The import
    /// commits with a mark per file: a file imported whole is marked so
    /// (a crash before it is deleted leaves a marked file, which is only
    /// deleted), a file imported in part gets a progress mark with the
    /// offset of its first record not imported, where any later import
    /// (this process's next part, or another's recovery after a crash)
    /// starts. No record is imported twice or skipped. The transaction
    /// also drops the marks of files deleted earlier (`settledMarks`), and
    /// these files' marks join them. A file opened before the latest
    /// revocation of consent (its epoch is older than the stored count) is
    /// purged instead: marked and deleted, nothing imported.
    func importJournals(_ files: [JournalFile], limit: Int = .max, maxBytes: Int = .max,
                        _ settledMarks: inout [String]) throws(AppNorthError) -> [ImportedPart] {
        let marks = settledMarks
        let (refused, cursors, parts) = try table.db.transaction {
            conn throws(AppNorthError) -> (Int, [ImportCursor], [ImportedPart]) in
            var (cursors, parts, refused) = try openCursors(conn, files)
            let (count, bytes) = try insertOldest(conn, files, &cursors, &parts, limit: limit, maxBytes: maxBytes)
            try markImports(conn, files, cursors, &parts, settled: marks)
            table.add(count, bytes)
            return (refused, cursors, parts)
        }
        for (file, cursor) in zip(files, cursors) where cursor.damaged > 0 {
            table.damagedDropped.add(cursor.damaged, ordering: .relaxed)
            logger.log(.warning, "event queue: skipped \(cursor.damaged) damaged stretch(es) of the event journal \(file.name)")
        }
        if refused > 0 {
            consentDropped.add(refused, ordering: .relaxed)
            logger.log(.info, "event queue: purged \(refused) event(s) journaled before a revocation of consent")
        }
        settledMarks.removeAll()
        for (file, part) in zip(files, parts) where part.finished {
            journal.directory.remove(file.name)
            settledMarks.append(file.name)
        }
        return parts
    }

    /// Each file's cursor at its first record not imported (none for a
    /// file marked imported whole). Records a trim of another handle
    /// dropped past this handle's last import of its own file are settled
    /// (`expected`); a file from before the latest revocation is taken
    /// whole as refused (purged). In the import's transaction.
    private func openCursors(_ conn: SQLiteStore.Connection, _ files: [JournalFile]) throws(AppNorthError)
        -> (cursors: [ImportCursor], parts: [ImportedPart], refused: Int) {
        let revocations = try ConsentRecord.revocations(conn)
        var parts = [ImportedPart](repeating: ImportedPart(), count: files.count)
        var cursors: [ImportCursor] = []
        var refused = 0
        for (index, file) in files.enumerated() {
            var cursor = ImportCursor(position: file.reader.size)
            defer { cursors.append(cursor) }
            guard let start = try Self.importedOffset(conn, file.name, within: file.reader.size) else { continue }
            try cursor.advance(file.reader, from: start)
            if let expected = file.expected, start > expected {
                var position = expected
                while let found = try file.reader.next(from: position), let event = found.event,
                      found.end <= start {
                    parts[index].records += 1
                    parts[index].bytes += RowCost.bytes(payload: event.payload.count)
                    position = found.end
                }
            }
            guard EventJournal.epoch(ofName: file.name) == revocations else {
                while let event = cursor.head {
                    parts[index].records += 1
                    parts[index].bytes += RowCost.bytes(payload: event.payload.count)
                    try cursor.advance(file.reader, from: cursor.headEnd)
                }
                refused += parts[index].records
                continue
            }
        }
        return (cursors, parts, refused)
    }

    /// Inserts up to `limit` records, the files' heads merged by their
    /// timestamps; returns the rows and bytes that went in (an id already
    /// queued is the same event: ids are UUIDv7). Stops once `maxBytes` of
    /// payload went in (after one record at least).
    private func insertOldest(_ conn: SQLiteStore.Connection, _ files: [JournalFile], _ cursors: inout [ImportCursor],
                              _ parts: inout [ImportedPart], limit: Int, maxBytes: Int) throws(AppNorthError) -> (Int, Int) {
        var count = 0, bytes = 0, taken = 0, takenBytes = 0
        let insert = try conn.rowInserter("INSERT OR IGNORE INTO events (id, payload, bytes) VALUES (?, ?, ?)")
        while taken < limit {
            var oldest: Int?
            for index in cursors.indices where cursors[index].head != nil {
                if let best = oldest, cursors[best].headMilliseconds <= cursors[index].headMilliseconds { continue }
                oldest = index
            }
            guard let index = oldest, let event = cursors[index].head else { break }
            let cost = RowCost.bytes(payload: event.payload.count)
            if try insert.run(event.id, event.payload, Int64(event.payload.count)) > 0 {
                count += 1
                bytes += cost
            }
            parts[index].records += 1
            parts[index].bytes += cost
            taken += 1
            takenBytes += cost
            try cursors[index].advance(files[index].reader, from: cursors[index].headEnd)
            if takenBytes >= maxBytes { break }
        }
        return (count, bytes)
    }

    /// Each file's mark: imported whole (and then finished), or its
    /// progress; and the marks of files deleted before (`settled`) go.
    private func markImports(_ conn: SQLiteStore.Connection, _ files: [JournalFile], _ cursors: [ImportCursor],
                             _ parts: inout [ImportedPart], settled: [String]) throws(AppNorthError) {
        for (index, file) in files.enumerated() {
            parts[index].position = cursors[index].position
            if cursors[index].head == nil {
                parts[index].finished = true
                try conn.kvPut(Self.importedNamespace, file.name, [], updatedMs: 0)
                try conn.kvDelete(Self.progressNamespace, file.name)
            } else if parts[index].records > 0 {
                try conn.kvPut(Self.progressNamespace, file.name, Array(String(cursors[index].position).utf8), updatedMs: 0)
            }
        }
        for name in settled {
            try conn.kvDelete(Self.importedNamespace, name)
            try conn.kvDelete(Self.progressNamespace, name)
        }
    }

    /// Where an import of `name` starts: the offset its progress mark
    /// holds (clamped to the file; a mark that is not a number starts over,
    /// and ids already queued are ignored), 0 without a mark, nil when the
    /// file is marked imported whole.
    static func importedOffset(_ conn: SQLiteStore.Connection, _ name: String,
                                       within size: Int) throws(AppNorthError) -> Int? {
        guard try !conn.kvContains(importedNamespace, name) else { return nil }
        guard let value = try conn.kvValue(progressNamespace, name), value.count <= 20, let offset = Int(String(decoding: value, as: UTF8.self)) else { return 0 }
        return min(max(0, offset), size)
    }

    /// The kv namespaces of the marks `importJournals` leaves: files
    /// imported whole, and files imported in part (the value: the offset
    /// of the first record not imported, in decimal). Two namespaces, so
    /// that a library from before imports in parts, finding a file with a
    /// progress mark, imports it whole (the server drops the copies by
    /// event id) rather than deleting it as imported.
    static let importedNamespace = Schema.Namespace.journalImported
    static let progressNamespace = Schema.Namespace.journalProgress
}
