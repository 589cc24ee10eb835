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

    /// How one batch's upload ended.
    enum BatchOutcome {
        case delivered
        /// Kept for the next cycle (5xx, network: `kept`), or discarded (4xx).
        case failed(AppNorthError, kept: Bool)
        /// Consent was revoked or the queue is closing: the batch is left
        /// alone (a revocation has purged it).
        case abandoned
    }

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
        /// The batch read while the previous one was in flight.
        var ahead: PreparedBatch?
        /// A delivered batch whose rows are deleted while the next is in
        /// flight (a crash before that resends it; the server deduplicates).
        var undeleted: [StoredEvent] = []
        func deleteDelivered() {
            guard !undeleted.isEmpty else { return }
            _ = try? store.remove(undeleted)
            undeleted = []
            store.leaseFloor.store(Int64.max, ordering: .relaxed)
        }
        defer {
            deleteDelivered()
            store.releaseLease()  // every attempt has ended (`endAttempt`)
        }
        while !thread.isStopping {
            refreshConsent()
            let (allowed, batchSize, generation) = state.withLock { s in
                (!s.breaker.isOpen && s.allowsTracking(requireConsent: options.requireConsent),
                 s.networkType.batchSize, s.consentGeneration)
            }
            guard allowed else { return state.withLock { $0.breaker.isOpen } ? .paused : .succeeded }
            let batch: PreparedBatch
            let part = Self.drainPart(batchSize)
            do {
                try store.recoverOrphansIfDue()
                // A short batch read ahead may have missed rows drained since.
                if let next = ahead, next.generation == generation, next.events.count == batchSize,
                   next.removals == store.removals.load(ordering: .acquiring) {
                    batch = next
                } else {
                    // Only the journal's oldest part before this batch: the
                    // rest goes in while the requests are in flight.
                    try drainIntoTable(part: part)
                    deleteDelivered()
                    batch = try prepareBatch(batchSize, after: nil, generation)
                }
                ahead = nil
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
            let outcome = upload(batch.events, generation, thread, body: batch.body,
                                 deferRemoval: { delivered in
                // The batch before, if its request's wait did not delete it.
                deleteDelivered()
                undeleted = delivered
                // Still leased until deleted: a trim must not count them as dropped.
                if let first = delivered.first?.seq { self.store.leaseFloor.store(first, ordering: .relaxed) }
            }, whileWaiting: {
                deleteDelivered()
                // The journal's next part, while the server works (a failure
                // is met again, and reported, before the next batch).
                if self.store.hasRetiredRest { try? self.drainIntoTable(part: part) }
                ahead = try? self.prepareBatch(batchSize, after: batch.events.last?.seq, generation)
            })
            switch outcome {
            case .delivered:
                continue
            case .abandoned:
                // A revocation by another handle is acted on now, not at the next track.
                refreshConsent()
                return .succeeded
            case .failed(let error, let kept):
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
                return kept ? .kept : .discarded
            }
        }
        return .succeeded
    }

    /// How an upload cycle ended (`UploadTrigger.CycleResult`).
    typealias CycleResult = UploadTrigger.CycleResult

    /// Sends one batch with the retry schedule. Every attempt first checks,
    /// under the state lock, that consent has not been revoked since the
    /// batch was read (`generation`), and registers its request so that a
    /// revocation cancels it.
    ///
    /// `body`: the batch's body, when prepared ahead. `deferRemoval`: takes
    /// the delivered rows instead of deleting them now. `whileWaiting`: runs
    /// once the first attempt's request is out (`HTTPTransport.perform`).
    func upload(_ batch: [StoredEvent], _ generation: UInt64, _ thread: BackgroundThread,
                        body: BatchBody? = nil, deferRemoval: (([StoredEvent]) -> Void)? = nil,
                        whileWaiting: (() -> Void)? = nil) -> BatchOutcome {
        var batch = batch
        var body = body ?? BatchBody(batch, client.compression)
        var whileWaiting = whileWaiting
        var retry = 0
        while true {
            guard waitForRetryAfter(generation, thread) else { return .abandoned }
            // Rows a trim (or another handle) deleted since the batch was
            // read are not sent; the rest is leased for the attempt.
            try? store.trimIfOverLimits((options.maxQueuedEvents, options.maxQueuedBytes))
            let floor = store.leaseFloor.load(ordering: .relaxed)
            guard let rest = try? store.lease(batch, from: floor == Int64.max ? nil : floor) else {
                return .failed(.storage("cannot read the event queue"), kept: true)
            }
            if rest.isEmpty { return .delivered }
            if rest.count != batch.count {
                logger.log(.debug, "events: \(batch.count - rest.count) event(s) of the batch left the queue before its attempt")
                batch = rest
                body = BatchBody(rest, client.compression)
            }
            // The fence keeps a revocation in another handle from returning
            // while this attempt, checked before it, is still in progress.
            let attempt = consentWatch.withUploadFence { () -> (Int?, HTTPResponse?, AppNorthError?)? in
                guard let cancel = beginAttempt(generation) else { return nil }
                return send(body, cancel: cancel, whileWaiting: whileWaiting)
            }
            whileWaiting = nil
            store.endAttempt(delivered: attempt.map { UploadStatusPolicy.outcome(for: $0.0) == .delivered } ?? false)
            guard let (status, response, error) = attempt else { return .abandoned }
            // Another handle's revocation during the attempt is adopted now:
            // the batch is then left alone (that revocation purged it).
            refreshConsent()
            let revoked = state.withLock { s -> Bool in
                s.inFlight = nil
                s.lastAttemptMs = clock.wallMilliseconds()
                return s.consentGeneration != generation
            }
            // Whatever came back, a revocation has purged these events.
            if revoked || thread.isStopping { return .abandoned }
            switch UploadStatusPolicy.outcome(for: status) {
            case .delivered:
                if let deferRemoval { deferRemoval(batch) } else { _ = try? store.remove(batch) }
                let failuresBefore = state.withLock { s -> Int in
                    let before = s.breaker.consecutiveFailures
                    s.delivered &+= batch.count
                    s.breaker.recordSuccess()
                    s.lastFlushMs = clock.wallMilliseconds()
                    return before
                }
                logger.log(.debug, "events: batch of \(batch.count) delivered (HTTP \(status ?? 0))")
                if failuresBefore > 0 { logger.log(.info, "events: uploads work again after \(failuresBefore) failure(s)") }
                return .delivered
            case .discard:
                let error = error ?? .http("HTTP \(status ?? 0)", httpStatus: status ?? 0)
                record(error)
                let rest = dropRejected(batch, response)
                if let rest, !rest.isEmpty {
                    // Only the listed events were refused: the rest goes at once.
                    batch = rest
                    body = BatchBody(rest, client.compression)
                    continue
                }
                if rest == nil, batch.count > 1, status == 400 || status == 422 {
                    return bisect(batch, status ?? 0, generation, thread)
                }
                let gone = (try? store.remove(batch)) ?? 0
                state.withLock { $0.dropped["client_error", default: 0] += gone }
                logger.log(.error, "event batch of \(batch.count) discarded after HTTP \(status ?? 0): check the event schema")
                return .failed(error, kept: false)
            case .split:
                if batch.count == 1 {
                    let gone = (try? store.remove(batch)) ?? 0
                    state.withLock { $0.dropped["payload_too_large", default: 0] += gone }
                    logger.log(.warning, "an event was too large for the server (HTTP 413) and was dropped")
                    return .delivered
                }
                let half = batch.count / 2
                let first = upload(Array(batch[..<half]), generation, thread)
                guard case .delivered = first else { return first }
                return upload(Array(batch[half...]), generation, thread)
            case .retry:
                if let response, let wait = RetryAfter.milliseconds(for: response, nowWallMs: clock.wallMilliseconds(),
                                                                       capMs: options.retryAfterCapMilliseconds) {
                    let until = ticks().addingSaturating(UInt64(clamping: wait).multipliedSaturating(by: 1_000_000))
                    state.withLock { $0.notBeforeMono = until }
                }
                let failure = error ?? .network("no response")
                record(failure)
                retry += 1
                guard let delay = options.retry.delay(retry: retry, unit: Random.unit()) else {
                    logger.log(.debug, "events: batch of \(batch.count) kept for the next cycle after \(retry) attempt(s)")
                    return .failed(failure, kept: true)
                }
                logger.log(.debug, "events: batch of \(batch.count) failed; retry \(retry) in \(delay) ms")
                if !pause(milliseconds: delay, generation, thread) { return .abandoned }
            }
        }
    }

    /// A 400 or 422 that names no event of a batch of several: the halves
    /// go separately (as after a 413), down to single events, so that only
    /// what the server refuses is dropped and one poisoned event does not
    /// take the good ones with it. A batch every part of which is refused
    /// is a discarded batch (a failed flush); a batch of which some part
    /// went through is not.
    func bisect(_ batch: [StoredEvent], _ status: Int, _ generation: UInt64, _ thread: BackgroundThread) -> BatchOutcome {
        logger.log(.warning, "events: HTTP \(status) for a batch of \(batch.count) naming no event; sending it in halves")
        let half = batch.count / 2
        let first = upload(Array(batch[..<half]), generation, thread)
        switch first {
        case .abandoned, .failed(_, kept: true): return first
        case .delivered, .failed(_, kept: false): break
        }
        let second = upload(Array(batch[half...]), generation, thread)
        switch (first, second) {
        case (_, .abandoned), (_, .failed(_, kept: true)): return second
        case (.failed, .failed): return second
        default: return .delivered
        }
    }

    /// Registers the next attempt's request, unless consent was revoked
    /// since `generation`, here or by another handle (adopted or not), or
    /// the queue is closing.
    func beginAttempt(_ generation: UInt64) -> StreamCancellation? {
        state.withLock { s -> StreamCancellation? in
            guard s.consentGeneration == generation, s.revocationsAdopted == consentWatch.revocations,
                  !s.closed, !shutdown.isCancelled else { return nil }
            let cancel = StreamCancellation()
            s.inFlight = cancel
            return cancel
        }
    }

    /// After a 400 or 422 that lists rejected event ids (docs/protocol.md):
    /// drops those events, counts them as `client_error`, and returns the
    /// rest of the batch. Nil when the answer lists none of the batch's
    /// events: then the whole batch is refused, as the seed says.
    func dropRejected(_ batch: [StoredEvent], _ response: HTTPResponse?) -> [StoredEvent]? {
        guard let response, response.status == 400 || response.status == 422,
              let listed = RejectedEvents.ids(in: response.body) else { return nil }
        let rejected = batch.filter { listed.contains($0.id) }
        guard !rejected.isEmpty else { return nil }
        let gone = (try? store.remove(ids: rejected.map(\.id))) ?? 0
        state.withLock { $0.dropped["client_error", default: 0] += gone }
        logger.log(.error, "the server rejected \(rejected.count) of \(batch.count) events (HTTP \(response.status)): "
                   + "dropped them, sending the rest; check the event schema")
        return batch.filter { !listed.contains($0.id) }
    }

    /// Reads the oldest `limit` events (after `after`) and encodes them,
    /// noting what they were read under.
    func prepareBatch(_ limit: Int, after: Int64?, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
        // Noted before the read: a removal during it shows as a change.
        let removals = store.removals.load(ordering: .acquiring)
        let events = try store.oldest(limit, after: after)
        return PreparedBatch(events: events, body: BatchBody(events, client.compression), generation: generation,
                             removals: removals)
    }

    /// One POST of a batch.
    func send(_ body: BatchBody, cancel: StreamCancellation,
                      whileWaiting: (() -> Void)?) -> (Int?, HTTPResponse?, AppNorthError?) {
        var headers = client.standardHeaders()
        headers.append(("Content-Type", "application/json"))
        let request = HTTPRequest(method: .post, url: client.url("/events"), headers: headers, body: body.plain)
        do {
            let response = try client.upload(request, as: .eventBatch, packed: body.packed, cancel: cancel,
                                             whileWaiting: whileWaiting)
            if response.isSuccess { return (response.status, response, nil) }
            return (response.status, response,
                    AppNorthError.fromHTTP(status: response.status, message: AppNorthClient.serverMessage(response)))
        } catch {
            return (nil, nil, error)
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
            refreshConsent()
            guard state.withLock({ $0.consentGeneration == generation }) else { break }
            let now = ticks()
            if now >= deadline { return true }
            sleepMilliseconds(min(50, Int((deadline - now) / 1_000_000) + 1))
        }
        return false
    }
}
