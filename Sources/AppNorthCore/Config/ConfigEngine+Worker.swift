// The background thread of a ConfigEngine: a thin loop that runs what
// ConfigWorkerState decides (the stream, the polls while it is down, and
// background fetches), and feeds back how each ended.
extension ConfigEngine {
    // MARK: The worker state's one logged entry

    /// Changes the worker state under the state lock (with the timer's
    /// `now`) and logs a phase change at debug level.
    @discardableResult
    func step<R: Sendable>(_ cause: @autoclosure () -> String, _ body: (inout State, UInt64) -> R) -> R {
        let now = timer.monotonicNanoseconds()
        let (result, before, after) = state.withLock { s -> (R, ConfigWorkerState.Phase, ConfigWorkerState.Phase) in
            let before = s.worker.phase
            let result = body(&s, now)
            return (result, before, s.worker.phase)
        }
        if before != after {
            logger.log(.debug, "config worker: \(before.description(now: now)) -> \(after.description(now: now)) (\(cause()))")
        }
        return result
    }

    func send(_ event: ConfigWorkerState.Event) {
        let random = Random.unit()
        step("\(event)") { s, now in s.worker.handle(event, now: now, random: random) }
    }

    // MARK: Starting and stopping the thread

    /// Makes sure the background thread runs and has seen the latest
    /// requests. Returns false if no thread could be started.
    @discardableResult
    func ensureWorker() -> Bool {
        var finished: BackgroundThread?
        var failure: AppNorthError?
        let ok = step("thread needed") { s, now -> Bool in
            if isClosed { return false }
            if let running = s.thread, s.worker.phase != .exited, !running.thread.isStopping {
                running.thread.wake()
                return true
            }
            finished = s.thread?.thread
            let cancel = CancellationToken()
            do throws(AppNorthError) {
                let thread = try BackgroundThread(name: "appnorth-config") { [self] thread in
                    self.run(thread, cancel)
                }
                s.thread = WorkerThread(thread: thread, cancel: cancel)
                s.worker.handle(.threadStarted, now: now)
                return true
            } catch {
                s.thread = nil
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
        send(.startLive)
        noteStatus(.liveStarted)
        guard ensureWorker() else {
            send(.startLiveFailed)
            throw .internal("cannot start the config thread")
        }
    }

    func stopLive() {
        let wall = clock.wallMilliseconds()
        let running = step("stop") { s, now -> WorkerThread? in
            if s.worker.live { noteStatus(.liveStopped, in: &s, wallMilliseconds: wall) }
            s.worker.handle(.stopLive, now: now)
            let running = s.thread
            s.thread = nil
            return running
        }
        statusListeners.deliverPending()
        guard let running else { return }
        running.cancel.cancel()
        running.thread.stop()
        send(.threadJoined)
    }

    /// Cancels the running thread's transfer (a stream or a fetch), leaving
    /// the thread and the state as they are.
    func cancelTransfer() {
        state.withLock { $0.thread?.cancel }?.cancel()
    }

    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        listeners.close()
        statusListeners.close()
        stopLive()
        if let claimKey { ConfigCacheClaims.release(claimKey) }
    }

    // MARK: The loop

    /// The background thread's body: runs the worker state's actions until
    /// it answers `.exit` or the thread is stopped.
    private func run(_ thread: BackgroundThread, _ cancel: CancellationToken) {
        while !thread.isStopping {
            let action = step("next") { s, now in s.worker.next(now: now) }
            switch action {
            case .exit:
                return
            case .sleep(let until):
                if !thread.sleep(milliseconds: until.sleepMilliseconds(at: timer.monotonicNanoseconds())) { return }
            case .openStream:
                let outcome = runStream(thread, cancel)
                if thread.isStopping { return }
                if case .connected = outcome { noteStatus(.streamDropped) }
                send(.streamEnded(outcome))
            case .fetch(let kind):
                let ok = backgroundFetch(thread, cancel, what: kind.rawValue)
                if thread.isStopping { return }
                send(.fetchEnded(ok: ok))
            }
        }
    }

    /// The longest line or event a config stream may send.
    static let maxStreamEventBytes = 16 << 20

    /// Runs one stream connection until it ends.
    private func runStream(_ thread: BackgroundThread, _ cancel: CancellationToken) -> StreamOutcome {
        // Last-Event-ID only for what this object received from the server,
        // so that the first connection confirms a cached copy.
        let lastEventID = state.withLock { s -> String? in
            s.current.tier == .remote ? s.current.version.map { String($0) } : nil
        }
        var parser = ServerSentEventParser(maxEventBytes: Self.maxStreamEventBytes)
        var connected = false
        var overLimit = false
        let request = endpoint.streamRequest(lastEventID: lastEventID)
        do {
            let response = try endpoint.transport.stream(request, idleTimeoutMs: streamIdleTimeoutMilliseconds,
                                                         cancel: cancel, logger: logger) { [self] chunk in
                if !connected {
                    connected = true
                    send(.streamOpened)
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
            guard let error = response.error else { return connected ? .connected : .failed }
            noteRetryAfter(response)
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
}
