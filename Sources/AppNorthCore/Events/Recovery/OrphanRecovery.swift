import Glibc
import Synchronization

/// Orphan recovery: the journals that ended processes left (nobody holds
/// their lock) are claimed, imported (`EventImporter.importJournals`) and
/// deleted. Its own state is when it last looked.
final class OrphanRecovery: Sendable {
    let importer: EventImporter
    let largestJournal: Int
    /// When dead processes' journals were last looked for (monotonic ns).
    let lastScan: Lock<UInt64>
    var journal: EventJournal { importer.journal }
    var logger: Logger { importer.logger }

    init(importer: EventImporter, largestJournal: Int) {
        self.importer = importer
        self.largestJournal = largestJournal
        lastScan = Lock(Self.monotonicNanoseconds(), level: LockClass.orphanScan)
    }

    /// Imports the journals that dead processes left (nobody holds their
    /// lock), removes half-created ones, and forgets marks of files that
    /// are gone. Runs at open and, from the upload thread, every 10 s.
    func recover() throws(AppNorthError) {
        for name in journal.journalNames(creating: true) {
            if let fd = EventJournal.claimOrphan(name, in: journal.directory, logger: logger) {
                journal.directory.remove(name)
                close(fd)
            }
        }
        var imported = 0
        var settled: [String] = []
        // Claimed (and so locked) until imported; in groups, so that a
        // directory full of them never holds every descriptor at once.
        var claimed: [(fd: Int32, file: JournalFile)] = []
        func importClaimed() throws(AppNorthError) {
            defer {
                for entry in claimed { close(entry.fd) }
                claimed.removeAll()
            }
            if !claimed.isEmpty {
                // Files are not in the journal's totals: nothing to settle.
                let parts = try importer.importJournals(claimed.map(\.file), &settled)
                imported += parts.reduce(0) { $0 + $1.records }
            }
        }
        for name in journal.journalNames() {
            let path = journal.directory.file(name)
            guard let fd = EventJournal.claimOrphan(name, in: journal.directory, logger: logger) else { continue }
            // A file that cannot be read is left for the next scan: it
            // must not fail the open, or stop every upload cycle, for the
            // events that are readable.
            let reader: JournalReader
            do {
                reader = try JournalReader(fd: fd, path: path)
            } catch {
                close(fd)
                logger.log(.warning, "event queue: skipped a journal an ended process left: \(error.message)")
                continue
            }
            guard reader.size <= largestJournal else {
                setAside(name, size: reader.size)
                close(fd)
                continue
            }
            claimed.append((fd, JournalFile(name: name, reader: reader)))
            if claimed.count >= 32 { try importClaimed() }
        }
        try importClaimed()
        if imported > 0 { logger.log(.info, "event queue: recovered \(imported) event(s) from the journal of an ended process") }
        let db = importer.table.db
        let marks = try db.withConnection { conn throws(AppNorthError) in
            try conn.kvKeys(EventImporter.importedNamespace).map { (EventImporter.importedNamespace, $0) }
                + conn.kvKeys(EventImporter.progressNamespace).map { (EventImporter.progressNamespace, $0) }
        }
        // Marks of deleted files: this scan's, and any a process left when
        // it ended (or closed) before its next import dropped them.
        for (namespace, name) in marks where !journal.directory.exists(name) {
            try? db.kvDelete(namespace: namespace, key: name)
        }
        lastScan.withLock { $0 = Self.monotonicNanoseconds() }
    }

    /// An ended process's journal larger than the limits allow
    /// (`largestJournal`): no journal this library writes under them grows
    /// so large (a damaged disk, or a file put there), and walking it would
    /// cost every scan its size in reads. Renamed out of the journals
    /// (`<name>.aside`), left for a person to look at, and logged.
    func setAside(_ name: String, size: Int) {
        let aside = name + EventJournal.asideSuffix
        let moved = journal.directory.rename(name, to: aside)
        logger.log(.warning, "event queue: the journal \(name) an ended process left is \(size) bytes, more than "
                   + "the queue's limits allow (\(largestJournal)); "
                   + (moved ? "set aside as \(aside), not imported" : "left in place, not imported"))
    }

    /// `recover` when the last look is 10 s old.
    func recoverIfDue() throws(AppNorthError) {
        let due = lastScan.withLock { Self.monotonicNanoseconds() &- $0 >= 10_000_000_000 }
        if due { try recover() }
    }

    /// The orphan scan's timer runs on the real clock (an injected clock
    /// does not move on its own); SystemClock's reading saturates.
    static func monotonicNanoseconds() -> UInt64 { SystemClock().monotonicNanoseconds() }
}

extension LockClass {
    /// `OrphanRecovery.lastScan`: when ended processes' journals were last looked for.
    static let orphanScan = LockClass.leaf("OrphanRecovery.lastScan")
}
