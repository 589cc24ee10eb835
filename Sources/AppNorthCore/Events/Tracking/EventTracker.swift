import Synchronization

/// The track gate: from the host's text to the journal. Checks the text
/// (`TrackInput`), consent and the lifecycle, writes the event into the
/// calling thread's stripe (`EventJournal`), and acts past the thresholds
/// (`TrackThresholds`): wakes the uploader, or drains and trims past the
/// limits. Its own state is the stripes' (their locks, in the journal)
/// and the thresholds fixed at open; everything else it reads is another
/// owner's (one atomic load each on the hot path).
final class EventTracker: Sendable {
    /// `store.journal`, used without a retain: every thread's retain and
    /// release of the one journal object would write the same word.
    /// `store` holds it for as long as the tracker lives.
    let journalRef: Unmanaged<EventJournal>
    /// `store.limits`, lent the same way: reading its figures took a
    /// retain and a release per event (about 40 instructions, callgrind).
    let limitsRef: Unmanaged<QueueLimits>
    let store: EventStore
    let maxEventBytes: Int
    let thresholds: TrackThresholds
    /// Four steps of bytes (128 KiB by default): how much this handle
    /// journals between two looks at the directory's files
    /// (`QueueLimits.journalFiles`).
    let lookInterval: Int
    let consent: EventConsent
    let sender: EventSender
    let lifecycle: EventsLifecycle
    let counters: EventCounters
    let uploader: EventUploader
    let drain: QueueDrain
    /// The settings' gate (switched off, sampled out, blocked names),
    /// lent like `journalRef`: `settings` holds it.
    let settingsRef: Unmanaged<EventSettingsOwner>
    let settings: EventSettingsOwner
    let clock: any AppNorthClock
    /// `clock` is the system's (a host's own clock or a test's is not):
    /// read directly, not through the existential (about 15 instructions).
    let systemClock: Bool
    /// The session policy has a limit (`EventSender.rotateIfDue`).
    let rotatesSessions: Bool
    /// The host's before_send hook, if any (`trackFiltered`).
    let beforeSend: BeforeSendFilter?

    init(store: EventStore, options: AppNorthEventsOptions, consent: EventConsent, sender: EventSender,
         lifecycle: EventsLifecycle, counters: EventCounters, uploader: EventUploader, drain: QueueDrain,
         settings: EventSettingsOwner, clock: any AppNorthClock, beforeSend: BeforeSendFilter? = nil) {
        journalRef = Unmanaged.passUnretained(store.journal)
        limitsRef = Unmanaged.passUnretained(store.limits)
        self.store = store
        maxEventBytes = options.maxEventBytes
        var rows = options
        rows.maxQueuedBytes = FileBudget.rowBytes(options.maxQueuedBytes)
        thresholds = TrackThresholds(rows, stripes: EventJournal.stripeCount)
        lookInterval = max(1, thresholds.step.bytes.multipliedSaturating(by: 4))
        self.consent = consent
        self.sender = sender
        self.lifecycle = lifecycle
        self.counters = counters
        self.uploader = uploader
        self.drain = drain
        self.settings = settings
        settingsRef = Unmanaged.passUnretained(settings)
        self.clock = clock
        systemClock = clock is SystemClock
        rotatesSessions = !options.session.isOff
        self.beforeSend = beforeSend
    }

    /// An event the settings' gate refused: counted, not an error.
    @inline(never)
    private func dropped(_ reason: EventCounters.DropReason) throws(AppNorthError) -> Bool {
        if lifecycle.isClosed { throw .wrongState("the event queue is closed") }
        counters.drop(1, reason)
        return false
    }

    /// `track` from text in memory (the C entry's: no String is made).
    /// `unchecked` names the arguments when their bytes are not known to be
    /// UTF-8 (C strings): they are checked then, and refused by those names.
    func track(utf8 name: UnsafeBufferPointer<UInt8>, properties: UnsafeBufferPointer<UInt8>?,
                      unchecked: (name: String, properties: String)? = nil) throws(AppNorthError) -> Bool {
        try TrackInput.check(name: name, properties: properties, unchecked: unchecked, maxEventBytes: maxEventBytes)
        // The settings' gate, before anything else is done for the event:
        // one load while nothing is switched off, sampled out or blocked.
        if let reason = settingsRef._withUnsafeGuaranteedRef({ $0.drop(name) }) { return try dropped(reason) }
        // The directory's super properties, merged under the host's own
        // (which win): their text counts toward the event's size.
        if let supers = sender.superProperties() {
            var merged = supers.merged(into: properties)
            return try EventTracker.withBytes(&merged) { merged throws(AppNorthError) in try queue(name, merged) }
        }
        return try queue(name, properties)
    }

    /// `track` past the checks of the host's text: consent, the session,
    /// the journal, the thresholds.
    @inline(__always)
    private func queue(_ name: UnsafeBufferPointer<UInt8>, _ properties: UnsafeBufferPointer<UInt8>?) throws(AppNorthError) -> Bool {
        if let beforeSend { return try trackFiltered(name, properties, beforeSend) }
        // Another handle's consent change is adopted before this event is
        // judged by it: one load while nothing changed.
        consent.refresh()
        // Everything from the consent check to the append runs under the
        // calling thread's stripe lock, which no other tracking thread
        // takes (EventJournal). A revocation flips `trackingAllowed`, then
        // rotates every stripe under its lock: a write that passed the
        // check is in the segment it purges, and a later one sees the flag.
        let timestampMs = systemClock ? SystemClock().wallMilliseconds() : clock.wallMilliseconds()
        // A new session when the event ends the last one (SessionPolicy),
        // before the stripe reads the tail that carries its id.
        if rotatesSessions { sender.rotateIfDue(nowMs: timestampMs) }
        return try append(TrackInput.Text(name: name, properties: properties), timestampMs: timestampMs)
    }

    /// The event into the calling thread's stripe (the host's text,
    /// assembled there, or an event the before_send hook saw), then what
    /// the thresholds ask for.
    @inline(__always)
    func append<Event: JournalEvent>(_ event: Event, timestampMs: Int64) throws(AppNorthError) -> Bool {
        let shared = store.limits.shared.load(ordering: .relaxed)
        let outcome = try journalRef._withUnsafeGuaranteedRef { journal in
            Result { () throws(AppNorthError) -> TrackOutcome in
                try journal.withCurrentStripe { stripe throws(AppNorthError) -> TrackOutcome in
                    try stripe.state.withLock { s throws(AppNorthError) -> TrackOutcome in
                        guard !lifecycle.isClosed else { return .closed }
                        guard consent.trackingAllowed.load(ordering: .acquiring) else { return .notAllowed }
                        let generation = sender.tailGeneration.load(ordering: .acquiring)
                        if s.tailGeneration != generation {
                            let (tail, current) = sender.tail
                            // A copy of its own: the shared buffer's reference count
                            // would be written by every thread's events.
                            s.tail = tail.withUnsafeBufferPointer { Array($0) }
                            s.tailGeneration = current
                        }
                        let size = try event.write(into: &s, timestampMs: timestampMs)
                        // A huge event's memory is not kept for the small ones after it.
                        defer { s.buffer.trim() }
                        guard size <= maxEventBytes else { return .tooLarge(size) }
                        try journal.append(&s, of: stripe)
                        return .queued(store.queuedAfterAppend(stripe, near: nearThresholds(shared: shared), step: thresholds.step.pair, margin: thresholds.margin.pair))
                    }
                }
            }
        }.get()
        let queued: (count: Int, bytes: Int)
        switch outcome {
        case .closed: throw .wrongState("the event queue is closed")
        case .notAllowed:
            if !lifecycle.isClosed { counters.drop(1, .consent) }
            return false
        case .tooLarge(let size): throw .tooLarge("event is \(size) bytes; the limit is \(maxEventBytes)")
        case .queued(let figure): queued = figure
        }
        // Past a limit by more than the slack, the journal is drained into
        // the table and the oldest dropped now (stats and `queuedCount`
        // trim the slack before they answer).
        if thresholds.pastLimits(queued, shared: shared) {
            try drain.run()
        } else {
            try keepFilesWithinLimit(queued, shared: shared)
        }
        // After a failed upload the timer brings the next attempt: waking
        // the uploader on every event would only cost the tracking thread.
        if queued.count >= uploader.wakeAt.load(ordering: .relaxed) { uploader.wake() }
        return true
    }

    /// The byte limit on the directory's files (FileBudget), below the
    /// queue's limits: what the files would hold while this handle's
    /// journal drains is the table, or the database file when larger (its
    /// free pages), this journal's copy in it, and every journal file of
    /// the directory (this one's stays whole until imported; another
    /// handle's or process's counts too: #32, the limit is the
    /// directory's). Past it, with only this handle's journal, the journal
    /// goes in (nothing is over, so nothing is trimmed); while another's
    /// holds events (`QueueLimits.shared`, with its smaller byte limit),
    /// a drain imports it and trims if the directory is over, once this
    /// handle has a step of its own to move (less: their owners act on
    /// their own steps, and a drain per event would read their files).
    /// While shared, a journal also goes in once it holds
    /// `TrackThresholds.sharedJournal` (FileBudget.sharedJournalBytes).
    @inline(__always)
    private func keepFilesWithinLimit(_ queued: (count: Int, bytes: Int), shared: Bool) throws(AppNorthError) {
        let files = journalRef._withUnsafeGuaranteedRef { journal in
            limitsRef._withUnsafeGuaranteedRef { limits in
                let journaled = journal.totals.bytes.load(ordering: .relaxed)
                let all = max(journaled, limits.journalFiles(journaled: journaled, interval: lookInterval))
                return (journaled, max(queued.bytes, limits.databaseFile.load(ordering: .relaxed).addingSaturating(all)).addingSaturating(all))
            }
        }
        // Unshared, one test more than before: the shared cases go out of line.
        guard shared || thresholds.pastLimits((queued.count, files.1), shared: false) else { return }
        if !shared { return try drain.importJournal() }
        try keepSharedWithinLimits(queued, files: files.1, journaled: files.0)
    }

    /// `keepFilesWithinLimit` while another handle's or process's journal
    /// holds events (`QueueLimits.shared`): past the shared byte limit, or
    /// with `TrackThresholds.sharedJournal` journaled, a drain once this
    /// handle has a step of its own to move. And the count limit is the
    /// directory's: `track`'s own view (the table at its last count, this
    /// handle's journal) misses the others' journals and what they
    /// imported, so every `TrackThresholds.sharedCount` events it counts
    /// the directory (`EventStore.trimIfOverLimits`: the table as SQLite
    /// has it, the other journal files) and drains and trims when it is
    /// over. Before, two handles tracking offline together held up to
    /// 1,736 events under a limit of 1,000, 1,878 one after the other.
    @inline(never)
    private func keepSharedWithinLimits(_ queued: (count: Int, bytes: Int), files: Int, journaled: Int) throws(AppNorthError) {
        if thresholds.pastLimits((queued.count, files), shared: true) || journaled >= thresholds.sharedJournal,
           journaled >= thresholds.step.bytes {
            try drain.run()  // a count of the directory too
            return limitsRef.takeUnretainedValue().countCheckedAt.store(store.queued.count, ordering: .relaxed)
        }
        let limits = limitsRef.takeUnretainedValue()
        let since = queued.count &- limits.countCheckedAt.load(ordering: .relaxed)
        guard since >= thresholds.sharedCount || since < 0 else { return }
        limits.countCheckedAt.store(queued.count, ordering: .relaxed)
        try store.trimIfOverLimits(drain.limits)
        // A trim took events off this handle's view: counted from there.
        let after = store.queued.count
        if after < queued.count { limits.countCheckedAt.store(after, ordering: .relaxed) }
    }

    /// Writes the event into the stripe's buffer (a fresh UUIDv7 from its
    /// pool, the timestamp and id time rendered once per millisecond);
    /// returns its size.
    @inline(__always)
    static func writeEvent(into s: inout JournalStripe.State, _ text: TrackInput.Text,
                           timestampMs: Int64) throws(AppNorthError) -> Int {
        let name = text.name, properties = text.properties
        s.stamp.update(timestampMs)
        let random = s.random.next80()
        let size = s.tail.withUnsafeBytes { tail in
            EventPayload.maximumSize(id: EventStamp.idLength, name: name.count, tail: tail.count, properties: properties?.count ?? 2)
        }
        guard let out = s.buffer.room(for: size) else { throw .internal("out of memory for an event of \(size) bytes") }
        var id: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        let written = withUnsafeMutableBytes(of: &id) { idBytes in
            s.stamp.writeID(random: random, to: idBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return s.tail.withUnsafeBytes { tail in
                EventPayload.write(to: out, id: UnsafeRawBufferPointer(rebasing: idBytes[0..<EventStamp.idLength]), name: name,
                                   stamp: s.stamp, tail: tail, properties: properties)
            }
        }
        s.buffer.count = written
        return written
    }

    /// A String's UTF-8 bytes, for a body that throws AppNorthError.
    static func withBytes<R>(_ text: inout String,
                             _ body: (UnsafeBufferPointer<UInt8>) throws(AppNorthError) -> R) throws(AppNorthError) -> R {
        try text.withUTF8 { bytes in Result { () throws(AppNorthError) in try body(bytes) } }.get()
    }

    /// An array's bytes, for a body that throws AppNorthError.
    static func withBytes<R>(_ bytes: inout [UInt8],
                             _ body: (UnsafeBufferPointer<UInt8>) throws(AppNorthError) -> R) throws(AppNorthError) -> R {
        try bytes.withUnsafeBufferPointer { buffer in Result { () throws(AppNorthError) in try body(buffer) } }.get()
    }

    /// The deepest properties `track` accepts: 32 objects and arrays, the
    /// properties object itself counted (docs/events.md, "Nesting"). In a
    /// batch they sit 3 levels down, so a batch nests at most 35 deep:
    /// within the 64 of .NET's System.Text.Json default and serde_json's
    /// 128, which servers that parse events commonly use, where jansson's
    /// 2048 (the check that remains for the rest) is far beyond them.
    static let maxPropertiesNesting = 32

    enum TrackOutcome {
        case queued((count: Int, bytes: Int))
        case notAllowed
        case closed
        case tooLarge(Int)
    }

    /// The figures past which `track` acts: the flush threshold (wake the
    /// uploader) and the limits with their slack (drain and trim). After a
    /// failed upload `track` does not wake the uploader (the timer brings
    /// the next attempt), so only the limits count: an offline queue above
    /// the threshold is then not counted exactly on every event, which
    /// would make every tracking thread write the shared totals.
    func nearThresholds(shared: Bool) -> (count: Int, bytes: Int) {
        thresholds.near(wakeAt: uploader.wakeAt.load(ordering: .relaxed), shared: shared)
    }
}
