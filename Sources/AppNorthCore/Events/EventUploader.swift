import Synchronization

/// The upload thread: flush cycles, batches, retries.
extension AppNorthEvents {
    // MARK: - The upload thread

    func wakeUploader() {
        worker.withLock { $0 }?.wake()
    }

    /// The upload thread's timers (flush interval, retry delays,
    /// Retry-After) run on the handle's clock: real monotonic time by
    /// default. An injected clock cannot wake the thread when it moves, so
    /// the thread then looks at it at least every 50 ms.
    func ticks() -> UInt64 { clock.monotonicNanoseconds() }
    var longestSleepMs: Int { clock is SystemClock ? Int.max : 50 }

    /// One turn of the upload thread: asks the trigger (`UploadTrigger`, a
    /// value) whether a cycle is due, runs it, and tells the trigger how it
    /// ended; the one place where the thread's state moves, logged at debug
    /// level. Returns how long to sleep before the next turn (0: at once).
    func uploaderStep(_ thread: BackgroundThread, _ trigger: inout UploadTrigger) -> Int {
        let (requested, breakerOpen) = state.withLock { ($0.flushRequested, $0.breaker.isOpen) }
        let seen = UploadTrigger.Inputs(now: ticks(), queued: store.count, flushRequested: requested,
                                        breakerOpen: breakerOpen)
        switch trigger.next(seen) {
        case .sleep(let milliseconds, let wake):
            wakeAt.store(wake, ordering: .relaxed)
            return max(1, min(longestSleepMs, milliseconds))
        case .runCycle(let target, let reason):
            wakeAt.store(Int.max, ordering: .relaxed)
            let result = uploadCycle(thread)
            // Space comes back once everything went (SQLiteStore.compact).
            if result == .succeeded && store.count == 0 { db.compact() }
            let (failures, retryAfter) = state.withLock { ($0.breaker.consecutiveFailures, $0.notBeforeMono) }
            let queued = store.count
            let wake = trigger.cycleEnded(result, at: ticks(), flushTarget: target, queued: queued, failures: failures,
                                          schedule: options.retry, retryAfterUntil: retryAfter)
            logger.log(.debug, "events: cycle (\(reason.rawValue)) ended \(result), \(queued) queued; "
                       + "the next starts at \(wake == Int.max ? "flush or timer" : String(wake) + " queued")")
            uploadsFailing.store(result == .kept, ordering: .relaxed)
            wakeAt.store(wake, ordering: .relaxed)
            flushDone.advance(to: target)
            return 0
        }
    }

    /// How one batch's upload ended (`BatchUpload.Outcome`).
    typealias BatchOutcome = BatchUpload.Outcome

    /// Uploads batches until the queue is empty or one fails. Returns true
    /// when nothing failed. A failed cycle (a batch's first attempt and its
    /// retries, or a discarded batch) counts as one failure toward the
    /// circuit breaker: the seed counts failed flushes, not requests.
    ///
    /// Batches go one after another, and the work between two of them
    /// overlaps the server's: while a batch's request is in flight, the
    /// thread deletes the batch delivered before it and reads, checks and
    /// encodes the next one (`PreparedBatch`), which goes out as soon as
    /// the answer is in, if nothing it was read under has changed.
    func uploadCycle(_ thread: BackgroundThread) -> CycleResult {
        state.withLock { $0.cycleError = nil }
        var pipeline = CyclePipeline()
        defer {
            pipeline.deleteDelivered(store)
            store.releaseLease()  // every attempt has ended (`endAttempt`)
        }
        while !thread.isStopping {
            consentOwner.refresh()
            let (consents, generation) = consentOwner.uploadGate
            let (breakerOpen, batchSize) = state.withLock { ($0.breaker.isOpen, $0.networkType.batchSize) }
            let allowed = consents && !breakerOpen
            guard allowed else { return state.withLock { $0.breaker.isOpen } ? .paused : .succeeded }
            let part = Self.drainPart(batchSize)
            let batch: PreparedBatch
            do {
                batch = try nextBatch(&pipeline, batchSize, part: part, generation)
            } catch {
                record(error)
                state.withLock { $0.cycleError = error }
                return .kept
            }
            if batch.events.isEmpty {
                // A part can hold only ids already queued: the next one then.
                if store.hasRetiredRest { continue }
                return .succeeded
            }
            let outcome = upload(batch.events, generation, thread, body: batch.body, deferRemoval: { delivered in
                pipeline.deferRemoval(of: delivered, self.store)
            }, whileWaiting: {
                pipeline.deleteDelivered(self.store)
                // The journal's next part, while the server works (a failure
                // is met again, and reported, before the next batch).
                if self.store.hasRetiredRest { try? self.drainIntoTable(part: part) }
                pipeline.ahead = try? self.prepareBatch(batchSize, after: batch.events.last?.seq, generation)
            })
            switch outcome {
            case .delivered:
                continue
            case .abandoned:
                // A revocation by another handle is acted on now, not at the next track.
                consentOwner.refresh()
                return .succeeded
            case .failed(let error, let kept):
                recordFailedFlush(error)
                return kept ? .kept : .discarded
            }
        }
        return .succeeded
    }

    /// What one cycle carries from a batch to the next: the batch read
    /// while the previous one was in flight, and a delivered batch whose
    /// rows are deleted while the next is in flight (a crash before that
    /// resends it; the server deduplicates).
    struct CyclePipeline {
        var ahead: PreparedBatch?
        var undeleted: [StoredEvent] = []

        mutating func deleteDelivered(_ store: EventStore) {
            guard !undeleted.isEmpty else { return }
            _ = try? store.remove(undeleted)
            undeleted = []
            store.limits.leaseFloor.store(Int64.max, ordering: .relaxed)
        }

        /// The batch before, if its request's wait did not delete it; the
        /// delivered rows stay leased until deleted (a trim must not count
        /// them as dropped).
        mutating func deferRemoval(of delivered: [StoredEvent], _ store: EventStore) {
            deleteDelivered(store)
            undeleted = delivered
            if let first = delivered.first?.seq { store.limits.leaseFloor.store(first, ordering: .relaxed) }
        }
    }

    /// The cycle's next batch: the one read ahead, if it is still what a
    /// read now would give (a short one may have missed rows drained
    /// since); else the journal's oldest part goes in (the rest goes in
    /// while the requests are in flight) and the oldest rows are read.
    func nextBatch(_ pipeline: inout CyclePipeline, _ batchSize: Int, part: Int,
                   _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        try store.recoverOrphansIfDue()
        defer { pipeline.ahead = nil }
        if let next = pipeline.ahead, next.generation == generation, next.events.count == batchSize,
           next.removals == store.table.removals.load(ordering: .acquiring) {
            return next
        }
        try drainIntoTable(part: part)
        pipeline.deleteDelivered(store)
        return try prepareBatch(batchSize, after: nil, generation)
    }

    /// A failed flush: one more toward the circuit breaker.
    func recordFailedFlush(_ error: AppNorthError) {
        let opened = state.withLock { s -> Bool in
            let wasOpen = s.breaker.isOpen
            s.breaker.recordFailure()
            s.cycleError = error
            return !wasOpen && s.breaker.isOpen
        }
        if opened {
            logger.log(.warning, "events: circuit breaker open after \(options.breakerThreshold) failed flushes; "
                       + "uploads paused until start_session or foreground")
        }
    }

    /// How an upload cycle ended (`UploadTrigger.CycleResult`).
    typealias CycleResult = UploadTrigger.CycleResult

    /// Sends one batch through a `BatchDriver` (retries, 415, split,
    /// bisect, budget), this queue being its `BatchPort` (`BatchSide`).
    /// `body`: the batch's body, when prepared ahead. `deferRemoval`:
    /// takes the delivered rows instead of deleting them now.
    /// `whileWaiting`: runs once the first attempt's request is out
    /// (`HTTPTransport.perform`).
    func upload(_ batch: [StoredEvent], _ generation: UInt64, _ thread: BackgroundThread,
                body: BatchBody? = nil, deferRemoval: (([StoredEvent]) -> Void)? = nil,
                whileWaiting: (() -> Void)? = nil) -> BatchOutcome {
        // The prepared body serves every attempt of the whole batch.
        var side = BatchSide(events: self, generation: generation, thread: thread, prepared: body.map { (batch, $0) },
                             deferRemoval: deferRemoval, whileWaiting: whileWaiting)
        return BatchDriver(counters: counters, logger: logger).run(batch, schedule: options.retry, port: &side)
    }

    /// This queue as a batch's `BatchPort`: attempts through the store and
    /// the transport under the batch's consent generation.
    struct BatchSide: BatchPort {
        let events: AppNorthEvents
        let generation: UInt64
        let thread: BackgroundThread
        let prepared: ([StoredEvent], BatchBody)?
        let deferRemoval: (([StoredEvent]) -> Void)?
        /// Runs with the first attempt only.
        var whileWaiting: (() -> Void)?

        mutating func attempt(_ rows: [StoredEvent], compressed: Bool) -> BatchUpload.Input {
            defer { whileWaiting = nil }
            return events.attempt(rows, compressed: compressed, generation, thread, prepared: prepared,
                                  whileWaiting: whileWaiting)
        }

        func pause(milliseconds: Int) -> Bool { events.pause(milliseconds: milliseconds, generation, thread) }

        func removeDelivered(_ rows: [StoredEvent], deferrable: Bool) {
            if deferrable, let deferRemoval { deferRemoval(rows) } else { _ = try? events.store.remove(rows) }
        }

        func removeRefused(_ rows: [StoredEvent], byID: Bool) -> Int {
            (byID ? try? events.store.remove(ids: rows.map(\.id)) : try? events.store.remove(rows)) ?? 0
        }

        func recordSuccess() -> Int {
            events.state.withLock { s -> Int in
                let before = s.breaker.consecutiveFailures
                s.breaker.recordSuccess()
                s.lastFlushMs = events.clock.wallMilliseconds()
                return before
            }
        }
    }

    /// One attempt of `events`: waits out a Retry-After, trims the
    /// directory if it is over its limits, leases the rows still queued
    /// (those a trim, a purge or another handle deleted since the batch
    /// was read are not sent), and POSTs them, unless consent was revoked
    /// since `generation` (checked under the state lock, the request
    /// registered so that a revocation cancels it). What came of it, for
    /// the batch's `BatchUpload`.
    func attempt(_ events: [StoredEvent], compressed: Bool, _ generation: UInt64, _ thread: BackgroundThread,
                 prepared: ([StoredEvent], BatchBody)?, whileWaiting: (() -> Void)?) -> BatchUpload.Input {
        guard waitForRetryAfter(generation, thread) else { return .abandoned }
        try? store.trimIfOverLimits((options.maxQueuedEvents, options.maxQueuedBytes))
        let floor = store.limits.leaseFloor.load(ordering: .relaxed)
        guard let rest = try? store.lease(events, from: floor == Int64.max ? nil : floor) else {
            return .storageFailed(.storage("cannot read the event queue"))
        }
        if rest.isEmpty { return .gone }
        if rest.count != events.count {
            logger.log(.debug, "events: \(events.count - rest.count) event(s) of the batch left the queue before its attempt")
        }
        // `rest` is a part of the prepared batch: the same rows when as many.
        let body = prepared.flatMap { $0.0.count == rest.count ? $0.1 : nil } ?? BatchBody(rest, client.compression)
        // Registered (no lock held), so that a revocation in another handle
        // does not return while this attempt, checked after the
        // registration, is still in progress (ConsentWatch).
        let registered = consentOwner.watch.withUploadRegistered { () -> Answer? in
            guard let cancel = consentOwner.beginAttempt(generation) else { return nil }
            return send(body, compressed: compressed, cancel: cancel, whileWaiting: whileWaiting)
        }
        let answer: Answer? = registered ?? Answer(status: nil, response: nil,
                                                   error: .network("no upload slot of the data directory came free"), gzipped: false)
        store.endAttempt(delivered: answer.map { UploadStatusPolicy.outcome(for: $0.status) == .delivered } ?? false)
        guard let answer else { return .abandoned }
        // Another handle's revocation during the attempt is adopted now:
        // the batch is then left alone (that revocation purged it).
        consentOwner.refresh()
        let revoked = consentOwner.endAttempt(generation)
        state.withLock { $0.lastAttemptMs = clock.wallMilliseconds() }
        if revoked || thread.isStopping { return .abandoned }
        noteAnswer(answer)
        let rejected = answer.response.flatMap { $0.status == 400 || $0.status == 422 ? RejectedEvents.ids(in: $0.body) : nil }
        return .answered(sent: rest, status: answer.status, error: answer.error, gzipped: answer.gzipped,
                         rejected: rejected, jitter: Random.unit())
    }

    /// What one POST came back with.
    struct Answer {
        var status: Int?
        var response: HTTPResponse?
        var error: AppNorthError?
        /// The body went gzipped.
        var gzipped: Bool
    }

    /// What an answer tells beyond the batch: a failure is recorded (the
    /// stats' last error, a warning), a Retry-After is kept for every
    /// attempt and cycle, and a 415 to a gzip body turns compression off.
    func noteAnswer(_ answer: Answer) {
        if answer.status == 415 && answer.gzipped {
            if client.compression.noteRefused() {
                logger.log(.info, "the server answered 415 to a gzip body: this client sends uncompressed bodies from now on")
            }
            return
        }
        guard let error = answer.error else { return }
        record(error)
        if UploadStatusPolicy.outcome(for: answer.status) == .retry, let response = answer.response,
           let wait = RetryAfter.milliseconds(for: response, nowWallMs: clock.wallMilliseconds(),
                                              capMs: options.retryAfterCapMilliseconds) {
            let until = ticks().addingSaturating(UInt64(clamping: wait).multipliedSaturating(by: 1_000_000))
            state.withLock { $0.notBeforeMono = until }
        }
    }

    /// Reads the oldest `limit` events (after `after`) and encodes them,
    /// noting what they were read under.
    func prepareBatch(_ limit: Int, after: Int64?, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        // Noted before the read: a removal during it shows as a change.
        let removals = store.table.removals.load(ordering: .acquiring)
        let events = try store.oldest(limit, after: after)
        return PreparedBatch(events: events, body: BatchBody(events, client.compression), generation: generation,
                             removals: removals)
    }

    /// One POST of a batch, gzipped if `compressed` and the client
    /// compresses (a 415 to it is the caller's: `BatchUpload`).
    func send(_ body: BatchBody, compressed: Bool, cancel: CancellationToken, whileWaiting: (() -> Void)?) -> Answer {
        var headers = client.standardHeaders()
        headers.append(("Content-Type", "application/json"))
        let request = HTTPRequest(method: .post, url: client.url("/events"), headers: headers, body: body.plain)
        let packed = compressed ? client.compression.compressed(request, as: .eventBatch, packed: body.packed) : nil
        do {
            let response = try client.transport.perform(packed ?? request, cancel: cancel, whileWaiting: whileWaiting)
            return Answer(status: response.status, response: response, error: response.error, gzipped: packed != nil)
        } catch {
            return Answer(status: nil, response: nil, error: error, gzipped: packed != nil)
        }
    }

    func record(_ error: AppNorthError) {
        state.withLock { $0.lastError = error }
        logger.log(.warning, "event upload failed: \(error.message)")
    }

    /// Waits out a server's Retry-After. Returns false when the thread is
    /// stopping or consent was revoked meanwhile.
    func waitForRetryAfter(_ generation: UInt64, _ thread: BackgroundThread) -> Bool {
        let until = state.withLock { $0.notBeforeMono }
        let now = ticks()
        return until <= now || pause(milliseconds: Int((until - now) / 1_000_000), generation, thread)
    }

    /// Sleeps a retry delay. Wake-ups from `track` do not cut it short;
    /// stopping and a revocation of consent do (returns false).
    func pause(milliseconds: Int, _ generation: UInt64, _ thread: BackgroundThread) -> Bool {
        let deadline = ticks().addingSaturating(UInt64(clamping: milliseconds).multipliedSaturating(by: 1_000_000))
        while !thread.isStopping {
            consentOwner.refresh()
            guard consentOwner.generation == generation else { break }
            let now = ticks()
            if now >= deadline { return true }
            sleepMilliseconds(min(50, Int((deadline - now) / 1_000_000) + 1))
        }
        return false
    }
}
