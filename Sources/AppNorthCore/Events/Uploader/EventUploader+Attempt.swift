import Synchronization

/// One batch's upload: a `BatchDriver` through this queue's `BatchPort`,
/// and one attempt (Retry-After, the lease, consent, the POST).
extension EventUploader {
    /// Sends one batch through a `BatchDriver` (retries, 415, split,
    /// bisect, budget), this queue being its `BatchPort` (`StoreBatchPort`).
    /// `body`: the batch's body, when prepared ahead. `deferRemoval`:
    /// takes the delivered rows instead of deleting them now.
    /// `whileWaiting`: runs once the first attempt's request is out
    /// (`HTTPTransport.perform`).
    func upload(_ batch: [StoredEvent], _ generation: UInt64, _ thread: BackgroundThread,
                body: BatchBody? = nil, deferRemoval: (([StoredEvent]) -> Void)? = nil,
                whileWaiting: (() -> Void)? = nil) -> BatchUpload.Outcome {
        // The prepared body serves every attempt of the whole batch.
        var side = StoreBatchPort(uploader: self, generation: generation, thread: thread, prepared: body.map { (batch, $0) },
                             deferRemoval: deferRemoval, whileWaiting: whileWaiting)
        return BatchDriver(counters: counters, logger: logger).run(batch, schedule: options.retry, port: &side)
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
        try? store.trimIfOverLimits(drain.limits)
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
        let registered = consent.watch.withUploadRegistered { () -> Answer? in
            guard let cancel = consent.beginAttempt(generation) else { return nil }
            return send(body, compressed: compressed, cancel: cancel, whileWaiting: whileWaiting)
        }
        let answer: Answer? = registered ?? Answer(status: nil, response: nil,
                                                   error: .network("no upload slot of the data directory came free"), gzipped: false)
        store.endAttempt(delivered: answer.map { UploadStatusPolicy.outcome(for: $0.status) == .delivered } ?? false)
        guard let answer else { return .abandoned }
        // Another handle's revocation during the attempt is adopted now:
        // the batch is then left alone (that revocation purged it).
        consent.refresh()
        let revoked = consent.endAttempt(generation)
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
            consent.refresh()
            guard consent.generation == generation else { break }
            let now = ticks()
            if now >= deadline { return true }
            sleepMilliseconds(min(50, Int((deadline - now) / 1_000_000) + 1))
        }
        return false
    }
}
