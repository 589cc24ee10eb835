/// What the config's background thread does next, as a value: the engine
/// feeds it events (`handle`) and runs the action `next` answers. No
/// clock, thread, lock or random source inside: `now` (monotonic
/// nanoseconds on the engine's real-time timer) and the jitter's random
/// number come in as arguments, every moment it keeps is a `Deadline`, so tests drive it with plain numbers
/// (ConfigWorkerStateTests). docs/architecture.md has the diagram.
///
/// - Live updates on: open the stream; when it ends, wait the reconnect
///   backoff (restarting from the base delay after a stream that was
///   connected) and poll every poll interval meanwhile, at once when the
///   server refused the stream with an error status.
/// - A server's Retry-After holds back every request (stream, poll, fetch)
///   and so the reconnect too.
/// - A read of a config past its TTL asks for a fetch (a revalidation),
///   unless the stream is connected, one is already asked, or a failed
///   one's backoff or a Retry-After is pending. Live, a poll or the next
///   stream connection answers it; otherwise a one-shot background fetch.
/// - With nothing left to do the thread exits (`.exited`).
struct ConfigWorkerState: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// No thread: never started, returned, or stopped.
        case exited
        /// The thread decides what is next.
        case ready
        /// A one-shot background fetch runs (live updates off).
        case fetching
        /// A stream connection is being opened or is open.
        case streaming
        /// The stream is down: reconnect at `reconnectAt`, poll at
        /// `nextPollAt` meanwhile (each no sooner than a Retry-After).
        case down(reconnectAt: Deadline, nextPollAt: Deadline)
        /// A poll runs while the stream is down; `answersRead` when a read
        /// asked for it.
        case polling(reconnectAt: Deadline, answersRead: Bool)
    }

    enum Event: Sendable, Equatable {
        case startLive, startLiveFailed, stopLive
        /// A new thread runs (`.ready`), or the stopped one was joined.
        case threadStarted, threadJoined
        /// A read found the config past its TTL (see `mayRevalidate`).
        case readFoundStale
        /// No thread could be started for the read's fetch: it failed.
        case fetchNotStarted
        /// The stream delivered its first bytes.
        case streamOpened
        case streamEnded(StreamOutcome)
        /// The poll or background fetch ended; `ok` false when it failed.
        case fetchEnded(ok: Bool)
        /// A 429 or 503 asked to wait this long before any request.
        case serverAskedToWait(milliseconds: Int)
        /// A config or a 304 arrived: the failure backoff starts over.
        case serverAnswered
    }

    enum Action: Sendable, Equatable {
        case openStream
        case fetch(FetchKind)
        /// Sleep past this moment on the timer (a wake may cut it short).
        case sleep(until: Deadline)
        /// Return from the thread's body.
        case exit
    }

    enum FetchKind: String, Sendable, Equatable { case poll, backgroundFetch = "background fetch" }

    let backoff: Backoff
    let pollIntervalMilliseconds: Int
    private(set) var phase = Phase.exited
    private(set) var live = false
    /// A read asked for a fetch that the thread has not taken yet.
    private(set) var fetchWanted = false
    /// A read asked for a fetch that has not finished.
    private(set) var revalidating = false
    private(set) var streamConnected = false
    /// Stream attempts since the last connected one (this thread's).
    private(set) var attempt = 0
    /// Failed revalidations in a row, and the backoff they set.
    private(set) var failures = 0
    private(set) var retryNotBefore = Deadline(nanoseconds: 0)
    /// The end of a server's Retry-After (0: none).
    private(set) var serverNotBefore = Deadline(nanoseconds: 0)

    init(backoff: Backoff, pollIntervalMilliseconds: Int) {
        self.backoff = backoff
        self.pollIntervalMilliseconds = pollIntervalMilliseconds
    }

    /// Whether a read past the TTL may ask for a fetch now.
    func mayRevalidate(now: UInt64) -> Bool {
        !streamConnected && !revalidating && max(retryNotBefore, serverNotBefore).hasPassed(at: now)
    }

    // MARK: Events

    /// The one transition function for what happens outside `next`. An
    /// event that does not apply to the phase changes nothing.
    mutating func handle(_ event: Event, now: UInt64, random: Double = 0) {
        switch event {
        case .startLive: live = true
        case .startLiveFailed: live = false
        case .stopLive:
            live = false
            fetchWanted = false
            phase = .exited
        case .threadStarted:
            phase = .ready
            attempt = 0
        case .threadJoined:
            streamConnected = false
            revalidating = false
        case .readFoundStale:
            guard mayRevalidate(now: now) else { return }
            revalidating = true
            fetchWanted = true
        case .fetchNotStarted: finishRevalidation(failed: true, now: now, random: random)
        case .streamOpened: if phase == .streaming { streamConnected = true }
        case .streamEnded(let outcome): streamEnded(outcome, now: now, random: random)
        case .fetchEnded(let ok): fetchEnded(ok: ok, now: now, random: random)
        case .serverAskedToWait(let milliseconds):
            serverNotBefore = Deadline(milliseconds: milliseconds, after: now)
        case .serverAnswered:
            failures = 0
            retryNotBefore = Deadline(nanoseconds: 0)
        }
    }

    private mutating func streamEnded(_ outcome: StreamOutcome, now: UInt64, random: Double) {
        guard phase == .streaming else { return }
        streamConnected = false
        attempt = outcome == .connected ? 1 : attempt.addingSaturating(1)
        let reconnect = Deadline(milliseconds: backoff.delay(attempt: attempt, random: random), after: now)
        let poll = Deadline(milliseconds: outcome == .refused ? 0 : pollIntervalMilliseconds, after: now)
        phase = .down(reconnectAt: reconnect, nextPollAt: poll)
    }

    private mutating func fetchEnded(ok: Bool, now: UInt64, random: Double) {
        switch phase {
        case .fetching:
            finishRevalidation(failed: !ok, now: now, random: random)
            phase = .ready
        case .polling(let reconnectAt, let answersRead):
            if answersRead { finishRevalidation(failed: !ok, now: now, random: random) }
            phase = .down(reconnectAt: reconnectAt, nextPollAt: Deadline(milliseconds: pollIntervalMilliseconds, after: now))
        default:
            return
        }
    }

    private mutating func finishRevalidation(failed: Bool, now: UInt64, random: Double) {
        revalidating = false
        guard failed else { return }
        failures = failures.addingSaturating(1)
        retryNotBefore = Deadline(milliseconds: backoff.delay(attempt: failures, random: random), after: now)
    }

    // MARK: The decision

    /// What the thread does now. Mutating only to take a read's request
    /// and to enter the phase of the action it answers.
    mutating func next(now: UInt64) -> Action {
        switch phase {
        case .exited: return .exit
        case .ready: return nextWhenReady(now: now)
        case .down(let reconnectAt, let nextPollAt):
            if !live {
                phase = .ready
                return nextWhenReady(now: now)
            }
            return nextWhenDown(reconnectAt: reconnectAt, nextPollAt: nextPollAt, now: now)
        case .fetching, .streaming, .polling:
            // The action of this phase has not ended: nothing new to start.
            return .sleep(until: Deadline(milliseconds: pollIntervalMilliseconds, after: now))
        }
    }

    private mutating func nextWhenReady(now: UInt64) -> Action {
        if live {
            // A stream (re)connection answers a pending revalidation too.
            if fetchWanted {
                fetchWanted = false
                revalidating = false
            }
            if !serverNotBefore.hasPassed(at: now) { return .sleep(until: serverNotBefore) }
            phase = .streaming
            return .openStream
        }
        guard fetchWanted else {
            phase = .exited
            return .exit
        }
        if !serverNotBefore.hasPassed(at: now) { return .sleep(until: serverNotBefore) }
        fetchWanted = false
        phase = .fetching
        return .fetch(.backgroundFetch)
    }

    /// Polls every interval (at once when a read asks) until the reconnect
    /// time; a Retry-After pushes both back. A poll that could only start
    /// at or past the reconnect is left to the reconnect.
    private mutating func nextWhenDown(reconnectAt: Deadline, nextPollAt: Deadline, now: UInt64) -> Action {
        let asked = fetchWanted
        fetchWanted = false
        let pollDue = asked ? Deadline(nanoseconds: now) : nextPollAt
        let pollAt = max(pollDue, serverNotBefore)
        let end = max(reconnectAt, serverNotBefore)
        if pollAt.hasPassed(at: now) && pollAt < end {
            phase = .polling(reconnectAt: reconnectAt, answersRead: asked)
            return .fetch(.poll)
        }
        // The next stream connection answers the read.
        if asked { revalidating = false }
        if end.hasPassed(at: now) {
            phase = .ready
            return nextWhenReady(now: now)
        }
        phase = .down(reconnectAt: reconnectAt, nextPollAt: pollDue)
        return .sleep(until: min(end, pollAt))
    }
}

/// How a stream connection ended.
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

extension ConfigWorkerState.Phase {
    /// For the transition log: times relative to `now`.
    func description(now: UInt64) -> String {
        func inMs(_ t: Deadline) -> String { "\(t.remainingMilliseconds(at: now)) ms" }
        switch self {
        case .exited: return "exited"
        case .ready: return "ready"
        case .fetching: return "fetching"
        case .streaming: return "streaming"
        case .down(let reconnectAt, let nextPollAt):
            return "down (reconnect in \(inMs(reconnectAt)), poll in \(inMs(nextPollAt)))"
        case .polling(let reconnectAt, _): return "polling (reconnect in \(inMs(reconnectAt)))"
        }
    }
}
