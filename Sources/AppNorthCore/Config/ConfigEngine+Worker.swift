// The background thread of a ConfigEngine: live updates (the stream and
// the polls while it is down) and background fetches.
extension ConfigEngine {
    /// Sleeps until a server's Retry-After has passed. False when the
    /// thread must end.
    private func waitForServer(_ thread: BackgroundThread) -> Bool {
        while !thread.isStopping {
            let until = serverNotBefore
            let now = timer.monotonicNanoseconds()
            if now >= until { return true }
            if !thread.sleep(milliseconds: Int(clamping: (until - now) / 1_000_000).addingSaturating(1)) { return false }
        }
        return false
    }

    // MARK: The background thread

    /// Makes sure the background thread runs and has seen the latest
    /// requests. Returns false if no thread could be started.
    @discardableResult
    func ensureWorker() -> Bool {
        var finished: BackgroundThread?
        var failure: AppNorthError?
        let ok = control.withLock { c -> Bool in
            if isClosed { return false }
            if let worker = c.worker, !c.workerExiting, !worker.thread.isStopping {
                worker.thread.wake()
                return true
            }
            finished = c.worker?.thread
            let cancel = StreamCancellation()
            do throws(AppNorthError) {
                let thread = try BackgroundThread(name: "appnorth-config") { [self] thread in
                    self.run(thread, cancel)
                }
                c.worker = Worker(thread: thread, cancel: cancel)
                c.workerExiting = false
                return true
            } catch {
                c.worker = nil
                failure = error
                return false
            }
        }
        finished?.stop()  // joins a thread whose body has returned
        if let failure { logger.log(.error, "config: \(failure.message)") }
        return ok
    }

    func startLive() throws(AppNorthError) {
        guard !isClosed else { throw .wrongState("the config is closed") }
        control.withLock { $0.live = true }
        guard ensureWorker() else {
            control.withLock { $0.live = false }
            throw .internal("cannot start the config thread")
        }
    }

    func stopLive() {
        let worker = control.withLock { c -> Worker? in
            c.live = false
            c.fetchWanted = false
            let worker = c.worker
            c.worker = nil
            c.workerExiting = false
            return worker
        }
        guard let worker else { return }
        worker.cancel.cancel()
        worker.thread.stop()
        state.withLock { s in
            s.streamConnected = false
            s.revalidating = false
        }
    }

    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        listeners.close()
        stopLive()
        if let claimKey { ConfigCacheClaims.release(claimKey) }
    }

    /// The background thread's body: one-shot fetches while live updates
    /// are off, the stream/poll loop while they are on. It returns when it
    /// has nothing left to do or when stopped.
    private func run(_ thread: BackgroundThread, _ cancel: StreamCancellation) {
        var attempt = 0
        while !thread.isStopping {
            let (live, fetch) = control.withLock { c -> (Bool, Bool) in
                let fetch = c.fetchWanted
                c.fetchWanted = false
                if !c.live && !fetch { c.workerExiting = true }
                return (c.live, fetch)
            }
            if live {
                // A stream (re)connection answers a pending revalidation too.
                if fetch { finishRevalidation(failed: false) }
                if !waitForServer(thread) { return }
                let outcome = runStream(thread, cancel)
                if thread.isStopping { return }
                attempt = outcome == .connected ? 1 : attempt + 1
                let delay = backoff.delay(attempt: attempt, random: Random.unit())
                logger.log(.debug, "config stream ended (\(outcome)); reconnecting in \(delay) ms")
                if !waitBeforeReconnect(thread, cancel, delayMilliseconds: delay,
                                        pollNow: outcome == .refused) { return }
            } else if fetch {
                if !waitForServer(thread) { return }
                let ok = backgroundFetch(thread, cancel, what: "background fetch")
                finishRevalidation(failed: !ok)
            } else {
                return
            }
        }
    }

    enum StreamOutcome: Sendable, CustomStringConvertible {
        /// The stream was open (something arrived) and then ended.
        case connected
        /// The server answered with an error status: polling takes over.
        case refused
        /// No connection, or it ended before anything arrived.
        case failed

        var description: String {
            switch self {
            case .connected: return "connected, then closed"
            case .refused: return "refused"
            case .failed: return "failed"
            }
        }
    }

    /// The longest line or event a config stream may send.
    static let maxStreamEventBytes = 16 << 20

    /// Runs one stream connection until it ends.
    private func runStream(_ thread: BackgroundThread, _ cancel: StreamCancellation) -> StreamOutcome {
        // Last-Event-ID only for what this object received from the server,
        // so that the first connection confirms a cached copy.
        let lastEventID = state.withLock { s -> String? in
            s.current.tier == .remote ? s.current.version.map { String($0) } : nil
        }
        var parser = ServerSentEventParser(maxEventBytes: Self.maxStreamEventBytes)
        var connected = false
        var overLimit = false
        let request = endpoint.streamRequest(lastEventID: lastEventID)
        defer { state.withLock { $0.streamConnected = false } }
        do {
            let response = try endpoint.transport.stream(request, idleTimeoutMs: streamIdleTimeoutMilliseconds,
                                                         cancel: cancel, logger: logger) { [self] chunk in
                if !connected {
                    connected = true
                    state.withLock { $0.streamConnected = true }
                    logger.log(.debug, "config stream connected")
                }
                for event in parser.feed(chunk) {
                    if thread.isStopping { return false }
                    handle(event)
                }
                if parser.oversizeEvents > 0 {
                    // One endless line would otherwise hold the connection
                    // forever while the status still said OK.
                    overLimit = true
                    recordFailure(.tooLarge("config stream sent a line or event over \(Self.maxStreamEventBytes) bytes"),
                                  "stream")
                    return false
                }
                return !thread.isStopping
            }
            if response.isSuccess { return connected ? .connected : .failed }
            noteRetryAfter(response)
            let error = AppNorthError.fromHTTP(status: response.status, message: AppNorthClient.serverMessage(response))
            recordFailure(error, "stream")
            return .refused
        } catch {
            if thread.isStopping || overLimit { return .failed }
            if connected { return .connected }
            recordFailure(error, "stream")
            return .failed
        }
    }

    private func handle(_ event: ServerSentEvent) {
        guard event.type == "config" || event.type == "message" else { return }
        do {
            let (document, version) = try ConfigEndpoint.parsePayload(event.data, what: "config stream event")
            apply(.document(document, etag: version.map { "\"\($0)\"" }, version: version))
        } catch {
            recordFailure(error, "stream event")
        }
    }

    /// Waits `delayMilliseconds` before the next stream attempt, polling
    /// every poll interval meanwhile (at once if `pollNow`), and at once
    /// when a read asks for a fetch; a server's Retry-After (noted by the
    /// stream or a poll) holds back both the polls and the reconnect.
    /// Returns false when the thread must end.
    private func waitBeforeReconnect(_ thread: BackgroundThread, _ cancel: StreamCancellation,
                                     delayMilliseconds: Int, pollNow: Bool) -> Bool {
        let start = timer.monotonicNanoseconds()
        let deadline = start.addingSaturating(UInt64(clamping: delayMilliseconds).multipliedSaturating(by: 1_000_000))
        let interval = UInt64(clamping: pollIntervalMilliseconds).multipliedSaturating(by: 1_000_000)
        var nextPoll = pollNow ? start : start.addingSaturating(interval)
        while !thread.isStopping {
            let (live, asked) = control.withLock { c -> (Bool, Bool) in
                let asked = c.fetchWanted
                c.fetchWanted = false
                return (c.live, asked)
            }
            if !live { return true }
            var now = timer.monotonicNanoseconds()
            var notBefore = serverNotBefore
            if asked { nextPoll = now }
            if now >= max(nextPoll, notBefore) && max(nextPoll, notBefore) < max(deadline, notBefore) {
                let ok = backgroundFetch(thread, cancel, what: "poll")
                if asked { finishRevalidation(failed: !ok) }
                now = timer.monotonicNanoseconds()
                nextPoll = now.addingSaturating(interval)
                notBefore = serverNotBefore
            } else if asked {
                finishRevalidation(failed: false)
            }
            let end = max(deadline, notBefore)
            if now >= end { return !thread.isStopping }
            let wake = min(end, max(nextPoll, notBefore))
            let ms = Int(clamping: (wake > now ? wake - now : 0) / 1_000_000).addingSaturating(1)
            if !thread.sleep(milliseconds: ms) { return false }
        }
        return false
    }
}
