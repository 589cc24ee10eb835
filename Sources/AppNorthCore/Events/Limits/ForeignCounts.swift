/// The other journal files as `QueueLimits.isOver` counts them (#32: the
/// count limit is the directory's): each file's records are read once, as
/// they are appended, and their ends and running row cost kept, so a count
/// reads only what was written since the last one, and what lies past a
/// progress mark is a binary search. Reading every other journal whole at
/// each count made `track` three times slower while the directory was
/// shared (6,000 events: 13.1 s against 4.5 s, debug build): a count
/// follows every 1 % of the limit there (`EventTracker.keepSharedWithinLimits`).
struct JournalScan {
    /// The file read (a name is never reused, but a file that is not the
    /// one read before, or shorter, is read again from its start).
    var device: UInt64 = 0, inode: UInt64 = 0
    /// The offset after the last whole record read.
    var scanned = 0
    /// Each record's end offset, and the row cost up to and with it.
    var ends: [Int] = []
    var costs: [Int] = []

    /// Reads the records appended since the last read (a torn or unwritten
    /// tail is read again next time, as `QueueLimits.foreignJournals` stops there).
    mutating func read(_ reader: JournalReader) {
        var position = scanned
        while let next = try? reader.next(from: position), let event = next.event {
            ends.append(next.end)
            costs.append((costs.last ?? 0) + RowCost.bytes(payload: event.payload.count))
            position = next.end
        }
        scanned = position
    }

    /// The records that end past `start` (a progress mark: a record's end),
    /// and their row cost.
    func count(from start: Int) -> (records: Int, bytes: Int) {
        var low = 0, high = ends.count
        while low < high {
            let middle = (low + high) / 2
            if ends[middle] <= start { low = middle + 1 } else { high = middle }
        }
        return (ends.count - low, (costs.last ?? 0) - (low > 0 ? costs[low - 1] : 0))
    }
}

extension QueueLimits {
    /// The records the journal files in the directory (but `own`) still hold
    /// for the queue, and their row cost: what `foreignJournals` reads, counted
    /// from `scans` (files not listed any more are forgotten).
    func countForeign(_ conn: SQLiteStore.Connection, own: Set<String>) throws(AppNorthError) -> (records: Int, bytes: Int) {
        let names = try foreignJournalNames(conn, own: own)
        return try scans.withLock { scans throws(AppNorthError) -> (records: Int, bytes: Int) in
            var kept: [String: JournalScan] = [:], total = (records: 0, bytes: 0)
            for name in names {
                try withForeignJournal(conn, name) { info, reader, start in
                    var scan = scans[name] ?? JournalScan()
                    if scan.device != UInt64(info.st_dev) || scan.inode != UInt64(info.st_ino) || reader.size < scan.scanned {
                        scan = JournalScan(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                    }
                    scan.read(reader)
                    let part = scan.count(from: start)
                    total = (total.records + part.records, total.bytes + part.bytes)
                    kept[name] = scan
                }
            }
            scans = kept
            return total
        }
    }
}
