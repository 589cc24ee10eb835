/// The library's `UploadWorld`, for one cycle on the upload thread: the
/// event store (import, read, lease, delete), consent (the generation, the
/// request a revocation cancels, the directory's upload fence) and the
/// client's transport, through the transfer engine as reads go.
///
/// It carries two things from a batch to the next: the batch read ahead
/// (`prefetch`) and a delivered batch whose rows are deleted while the
/// next is in flight (a crash before that resends it; the server
/// deduplicates by event id).
final class StoreUploadWorld: UploadWorld {
    let store: EventStore
    let drain: QueueDrain
    let consent: EventConsent
    let client: AppNorthClient
    let thread: BackgroundThread
    let clock: any AppNorthClock
    let logger: Logger
    /// The longest a sleep waits before it looks at the clock again
    /// (`EventUploader.longestSleepMs`: an injected clock cannot wake it).
    let longestSleepMs: Int
    private var ahead: PreparedBatch?
    private var undeleted: [StoredEvent] = []

    init(store: EventStore, drain: QueueDrain, consent: EventConsent, client: AppNorthClient, thread: BackgroundThread,
         clock: any AppNorthClock, logger: Logger, longestSleepMs: Int) {
        self.store = store
        self.drain = drain
        self.consent = consent
        self.client = client
        self.thread = thread
        self.clock = clock
        self.logger = logger
        self.longestSleepMs = longestSleepMs
    }

    struct Sending {
        let answer: PendingAnswer
        let registration: ConsentWatch.UploadRegistration?
        let generation: UInt64
        let gzipped: Bool
    }

    var isStopping: Bool { thread.isStopping }
    var moreToImport: Bool { store.hasRetiredRest }

    func consentGeneration() -> UInt64? {
        consent.refresh()
        let (allowed, generation) = consent.uploadGate
        return allowed ? generation : nil
    }

    func readBatch(_ size: Int, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        try store.recoverOrphansIfDue()
        defer { ahead = nil }
        // A short batch read ahead may have missed rows drained since.
        if let next = ahead, next.generation == generation, next.events.count == size,
           next.removals == store.table.removals.load(ordering: .acquiring) {
            return next
        }
        try drain.run(part: QueueDrain.part(size))
        deleteDelivered()
        return try prepare(size, after: nil, generation)
    }

    /// The trim before an attempt (past a limit of the directory, another
    /// process may have filled it since the batch was read) and the lease.
    func lease(_ rows: [StoredEvent]) throws(AppNorthError) -> [StoredEvent] {
        try? store.trimIfOverLimits(drain.limits)
        let floor = store.limits.leaseFloor.load(ordering: .relaxed)
        return try store.lease(rows, from: floor == Int64.max ? nil : floor)
    }

    func send(_ rows: [StoredEvent], body: BatchBody?, compressed: Bool, _ generation: UInt64) -> Sending? {
        // Registered first (no lock held), so that a revocation in another
        // handle does not return while this attempt, checked after the
        // registration, is still in progress (ConsentWatch).
        guard let registration = consent.watch.registerUpload() else {
            let answer = PendingAnswer()
            answer.put(.failure(.network("no upload slot of the data directory came free")))
            return Sending(answer: answer, registration: nil, generation: generation, gzipped: false)
        }
        guard let cancel = consent.beginAttempt(generation) else {
            registration.end()
            store.endAttempt(delivered: false)
            return nil
        }
        let body = body ?? BatchBody(rows, client.compression)
        var headers = client.standardHeaders()
        headers.append(("Content-Type", "application/json"))
        let request = HTTPRequest(method: .post, url: client.url("/events"), headers: headers, body: body.plain)
        let packed = compressed ? client.compression.compressed(request, as: .eventBatch, packed: body.packed) : nil
        let answer = PendingAnswer()
        do {
            try AsyncTransfers.send(packed ?? request, with: client.transport, operation: cancel) { answer.put($0) }
        } catch {
            answer.put(.failure(error))
        }
        return Sending(answer: answer, registration: registration, generation: generation, gzipped: packed != nil)
    }

    func prefetch(after seq: Int64?, _ size: Int, _ generation: UInt64) {
        deleteDelivered()
        // The journal's next part, while the server works (a failure is
        // met again, and reported, before the next batch).
        if store.hasRetiredRest { try? drain.run(part: QueueDrain.part(size)) }
        ahead = try? prepare(size, after: seq, generation)
    }

    func receive(_ sending: Sending) -> UploadAnswer? {
        let result = sending.answer.wait()
        sending.registration?.end()
        let answer: UploadAnswer
        switch result {
        case .success(let response):
            answer = UploadAnswer(status: response.status, response: response, error: response.error, gzipped: sending.gzipped)
        case .failure(let error):
            answer = UploadAnswer(status: nil, response: nil, error: error, gzipped: sending.gzipped)
        }
        store.endAttempt(delivered: UploadStatusPolicy.outcome(for: answer.status) == .delivered)
        // Another handle's revocation during the attempt is adopted now:
        // the batch is then left alone (that revocation purged it).
        consent.refresh()
        if consent.endAttempt(sending.generation) || thread.isStopping { return nil }
        if answer.status == 415 && answer.gzipped && client.compression.noteRefused() {
            logger.log(.info, "the server answered 415 to a gzip body: this client sends uncompressed bodies from now on")
        }
        return answer
    }

    func settle(_ settlement: Settlement) -> Int {
        switch settlement {
        case .delivered(let rows, deferrable: true):
            deleteDelivered()
            undeleted = rows
            // Leased until deleted: a trim must not count them as dropped.
            if let first = rows.first?.seq { store.limits.leaseFloor.store(first, ordering: .relaxed) }
            return rows.count
        case .delivered(let rows, deferrable: false):
            return (try? store.remove(rows)) ?? 0
        case .refused(let rows, let byID):
            return (byID ? try? store.remove(ids: rows.map(\.id)) : try? store.remove(rows)) ?? 0
        case .cycleEnded:
            deleteDelivered()
            store.releaseLease()  // every attempt has ended (`endAttempt`)
            return 0
        }
    }

    /// Waits on the thread's wake-up signal until the deadline on the
    /// handle's clock: a stop wakes it, and so does a revocation of consent
    /// in this handle (`AppNorthEvents.setConsent`); one by another handle
    /// is seen at the next wake-up, and refused at the next attempt anyway
    /// (`EventConsent.beginAttempt`). `track` and `flush` wake-ups in
    /// between are slept through.
    func sleep(milliseconds: Int, _ generation: UInt64) -> Bool {
        let deadline = clock.monotonicNanoseconds()
            .addingSaturating(UInt64(clamping: milliseconds).multipliedSaturating(by: 1_000_000))
        while !thread.isStopping {
            consent.refresh()
            guard consent.generation == generation else { return false }
            let now = clock.monotonicNanoseconds()
            if now >= deadline { return true }
            let left = Int(clamping: (deadline - now) / 1_000_000 + 1)
            _ = thread.sleep(milliseconds: min(longestSleepMs, left))
        }
        return false
    }

    /// Reads the oldest `size` events (after `seq`) and encodes them,
    /// noting what they were read under.
    private func prepare(_ size: Int, after seq: Int64?, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        // Noted before the read: a removal during it shows as a change.
        let removals = store.table.removals.load(ordering: .acquiring)
        let events = try store.oldest(size, after: seq)
        return PreparedBatch(events: events, body: BatchBody(events, client.compression), generation: generation,
                             removals: removals)
    }

    private func deleteDelivered() {
        guard !undeleted.isEmpty else { return }
        _ = try? store.remove(undeleted)
        undeleted = []
        store.limits.leaseFloor.store(Int64.max, ordering: .relaxed)
    }
}

/// The answer of a request the transfer engine runs, handed from its
/// thread to the upload thread, which waits for it.
final class PendingAnswer: @unchecked Sendable {
    // @unchecked: `result` is only touched with the condition's mutex held.
    private let condition = Lock<Void>((), level: LockClass.signal)
    private var result: Result<HTTPResponse, AppNorthError>?

    func put(_ value: Result<HTTPResponse, AppNorthError>) {
        condition.locked {
            result = value
            condition.broadcast()
        }
    }

    /// Waits for the answer: the engine always gives one (a cancel, its
    /// stop and the request's timeout included).
    func wait() -> Result<HTTPResponse, AppNorthError> {
        condition.locked {
            condition.wait(until: { result != nil }, deadline: nil)
            return result!
        }
    }
}
