import Glibc
import Synchronization

/// The journal-to-table stage of the event queue: drains rotate this
/// handle's journal files out and import them into the `events` table,
/// oldest first, then let the limits trim (`QueueLimits`). Its lock is the
/// drain's turn: drains, purges and the census never overlap, so the totals
/// a census reads are never caught between an import's two counters (the
/// table's, then the journal's), and two trims never drop the same excess.
final class EventImporter: Sendable {
    let table: EventTable
    let journal: EventJournal
    let limits: QueueLimits
    let logger: Logger
    /// Journaled events purged at import because a revocation of consent
    /// came after their segment was opened (ConsentRecord).
    let consentDropped = Atomic<Int>(0)
    /// Held through a drain, a purge or a census.
    let state: Lock<ImportState>

    struct ImportState {
        /// Segments rotated out of the journal and not imported yet, or
        /// not whole: an import failed, or the upload cycle's drain has
        /// imported a part (`drainPart`). Their files stay locked, and
        /// nothing writes to them any more.
        var retired: [JournalSegment] = []
        /// The readers of retired files, by name: a file imported in
        /// parts goes on from the window its last part ended in.
        var readers: [String: JournalReader] = [:]
        /// Import marks of files already deleted: removed by the next
        /// import's transaction rather than by one of their own.
        var settledMarks: [String] = []
        /// Where the last import of each file in part ended (its offset).
        var offsets: [String: Int] = [:]
    }

    init(table: EventTable, journal: EventJournal, limits: QueueLimits, logger: Logger) {
        self.table = table
        self.journal = journal
        self.limits = limits
        self.logger = logger
        state = Lock(ImportState(), level: LockClass.drain)
    }

    /// Runs `body` in the drain's turn with the names of this handle's
    /// journal files (its stripes' and the retired ones): for the census,
    /// which reads the other journals from the directory.
    func withTurn<R>(_ body: (Set<String>) throws(AppNorthError) -> R) throws(AppNorthError) -> R {
        try state.withLock { state throws(AppNorthError) -> R in try body(ownFiles(state)) }
    }

    private func ownFiles(_ state: ImportState) -> Set<String> {
        var own = Set(state.retired.map(\.name))
        for stripe in journal.stripes {
            if let name = stripe.state.withLock({ $0.segment?.name }) { own.insert(name) }
        }
        return own
    }

    /// Moves the journal's records into the table: rotates every used
    /// stripe's file out and imports them, with the rest of any file
    /// imported in part before. Then, with `limits`, drops the oldest past
    /// them. Returns how many were dropped. `replacingFiles: false` (at
    /// close) leaves the stripes without a file instead of making fresh
    /// ones nobody will write.
    @discardableResult
    func drain(trimmingTo limits: (count: Int, bytes: Int)? = nil, replacingFiles: Bool = true) throws(AppNorthError) -> Int {
        try drain(at: nil, trimmingTo: limits, replacingFiles: replacingFiles)
    }

    /// The upload cycle's drain: imports at most `limit` of the oldest
    /// journaled events, so that the first batch goes out without waiting
    /// for the whole journal; the cycle imports the rest a part at a time
    /// while its requests are in flight. While rotated-out files still hold
    /// events, no stripe is rotated: the newer files wait until the older
    /// ones are imported, and events go out oldest first. Then trims like
    /// `drain`.
    @discardableResult
    func drainPart(_ limit: Int, trimmingTo limits: (count: Int, bytes: Int)? = nil) throws(AppNorthError) -> Int {
        try drain(at: max(1, limit), trimmingTo: limits, replacingFiles: true)
    }

    /// Imports the journal without a trim (`track`, when the journal and
    /// its copy in the table would pass the byte limit but the queue does
    /// not: FileBudget), the WAL fitted to the files (`rowLimit`).
    func importJournal(rowLimit: Int) throws(AppNorthError) {
        _ = try drain(at: nil, trimmingTo: nil, replacingFiles: true, walRowLimit: rowLimit)
    }

    /// Whether rotated-out files still hold events to import.
    var hasRetiredRest: Bool { state.withLock { !$0.retired.isEmpty } }

    /// The rotated-out segments not imported whole (for tests).
    var retiredSegments: [JournalSegment] { state.withLock { $0.retired } }

    private func drain(at most: Int?, trimmingTo bounds: (count: Int, bytes: Int)?,
                       replacingFiles: Bool, walRowLimit: Int? = nil) throws(AppNorthError) -> Int {
        try state.withLock { state throws(AppNorthError) -> Int in
            // Past a limit, the oldest events to drop may be journaled:
            // everything goes in, so that the trim drops exactly those.
            var most = most
            if let bounds, most != nil, try limits.isOver(bounds, own: ownFiles(state)) { most = nil }
            // A stripe whose fresh file cannot be made keeps its old one
            // for the next drain; the others are imported now.
            var rotateError: AppNorthError?
            if most == nil || state.retired.isEmpty {
                do throws(AppNorthError) {
                    try journal.rotate(into: &state.retired, fresh: replacingFiles)
                } catch {
                    rotateError = error
                }
            }
            // The WAL fitted once the files to import are known: fitted
            // before the rotation, it missed what `track` wrote meanwhile
            // (#32: 1.29 MB measured, 2.09 MB imported under load).
            if let rowLimit = walRowLimit ?? bounds?.bytes { try limits.fitWAL(rowLimit: rowLimit, own: ownFiles(state)) }
            // Parts of at most `importPartBytes` each, one transaction
            // each (with its progress marks), so the WAL never holds more
            // than one part.
            var left = most ?? .max
            while left > 0 && !state.retired.isEmpty {
                let taken = try importRetired(&state, limit: left)
                if taken == 0 { break }
                left -= taken
            }
            if let rotateError { throw rotateError }
            guard let bounds else { return 0 }
            return try limits.trim(to: bounds, own: ownFiles(state))
        }
    }

    /// The bytes (`RowCost`) one import transaction takes at most (beyond one
    /// record): what the WAL grows by per part.
    static let importPartBytes = 128 << 10

    /// Imports up to `limit` events (and about `importPartBytes`) of the
    /// retired segments in one transaction and settles what went in; a
    /// segment imported whole is deleted and leaves `retired`. Returns the
    /// records taken (0: nothing was left to take).
    private func importRetired(_ state: inout ImportState, limit: Int) throws(AppNorthError) -> Int {
        var files: [JournalFile] = []
        for segment in state.retired {
            let reader: JournalReader
            if let open = state.readers[segment.name] {
                reader = open
            } else {
                reader = try segment.reader()
                state.readers[segment.name] = reader
            }
            files.append(JournalFile(name: segment.name, reader: reader, expected: state.offsets[segment.name] ?? 0))
        }
        let parts = try importJournals(files, limit: limit, maxBytes: Self.importPartBytes, &state.settledMarks)
        var rest: [JournalSegment] = []
        for (segment, part) in zip(state.retired, parts) {
            if part.finished {
                journal.settle(segment)
                state.readers[segment.name] = nil
                state.offsets[segment.name] = nil
            } else {
                journal.settle(segment, records: part.records, bytes: part.bytes)
                state.offsets[segment.name] = part.position
                rest.append(segment)
            }
        }
        state.retired = rest
        return parts.reduce(0) { $0 + $1.records }
    }

    /// In the drain's turn: `first` (the table's side of a revocation)
    /// returns the stored revocation count; then the journal moves to that
    /// epoch, every stripe is rotated and every segment taken is removed. A
    /// `track` still writing holds its stripe's lock, which the rotation
    /// waits for: its event is purged too. Returns `first`'s rows and the
    /// records purged.
    func purge(_ first: () throws(AppNorthError) -> (epoch: Int64, rows: Int)) throws(AppNorthError) -> Int {
        try state.withLock { state throws(AppNorthError) -> Int in
            let (epoch, rows) = try first()
            journal.epoch.store(epoch, ordering: .releasing)
            try journal.rotate(into: &state.retired, fresh: false)
            var gone = rows
            for segment in state.retired {
                // A file imported in part loses its rest.
                gone += journal.unsettledRecords(segment)
                if segment.settledRecords.load(ordering: .relaxed) > 0 { state.settledMarks.append(segment.name) }
                journal.directory.remove(segment.name)
                journal.settle(segment)
            }
            state.retired.removeAll()
            state.readers.removeAll()
            state.offsets.removeAll()
            return gone
        }
    }
}

extension LockClass {
    /// `EventImporter.state`: the drain's turn: an import and its trim, a purge, a census of the directory.
    static let drain = LockClass(rank: 10, "EventImporter.state")
}
