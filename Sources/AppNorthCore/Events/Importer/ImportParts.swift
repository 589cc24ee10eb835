/// The values an import of journal files works with (`EventStore`'s
/// `importJournals`): the files, a cursor per file, and what each import
/// took from each file.

/// A journal file to import, read a window at a time.
struct JournalFile {
    let name: String
    let reader: JournalReader
    /// Where this handle's last import of it ended (its own files):
    /// a progress mark further on means another handle's trim dropped
    /// the records in between (QueueLimits), which are settled too.
    var expected: Int? = nil
}

/// What one import took from one file.
struct ImportedPart {
    /// Records taken (queued, or purged for consent), and their bytes in the files (`RowCost`).
    var records = 0
    var bytes = 0
    /// Nothing is left: the file is marked imported and deleted.
    var finished = false
    /// The offset of the first record not imported.
    var position = 0
}

/// A file's place in an import: the next record not imported (`head`,
/// decoded ahead) and where it starts.
struct ImportCursor {
    var position: Int
    var head: JournalRecord.Event?
    var headMilliseconds: Int64 = 0
    var headEnd = 0
    var damaged = 0

    /// Decodes the next record from `from` on.
    mutating func advance(_ reader: JournalReader, from: Int) throws(AppNorthError) {
        guard let found = try reader.next(from: from) else {
            position = max(from, reader.size)
            head = nil
            return
        }
        damaged += found.damaged
        position = found.start
        head = found.event
        headMilliseconds = found.event?.milliseconds ?? 0
        headEnd = found.end
    }
}
