import CCurl
import CSystem
import Glibc
import Synchronization

/// Runs the non-blocking transfers of the whole process with one curl
/// multi handle and one library thread: any number of transfers in flight,
/// no thread per operation.
///
/// Each transfer is an `EasyTransfer` set up by its client's transport
/// (timeouts, trust, proxy, limits are the client's); the multi handle's
/// connection cache keeps connections alive between transfers. At most
/// `maxHostConnections` transfers per origin are in curl's hands at a time;
/// the others wait their turn in the engine's own first-in, first-out queue
/// (`AdmissionQueue`), their total timeout running meanwhile. curl would
/// queue them too, but it walks every handle it holds on each turn, so 256
/// reads to one server cost it 32 times the work of 8.
///
/// Who drives curl (the event-driven multi interface,
/// curl_multi_socket_action): the engine thread waits in poll() on curl's
/// sockets and an eventfd, with no lock held, and runs each turn under
/// `drive`. curl reads, inflates (gzip) and copies the bodies inside those
/// turns, so a caller never waits for `drive`: `add`, `watch` and `reach`
/// only try it. When it is free (the engine sleeps in poll()), `add` hands
/// the transfer to curl on the caller's thread and, when the origin already
/// answered this engine (its DNS entry and connection are cached), lets
/// curl send the request there and then (non-blocking socket writes; never
/// a host callback): the request is on its way while the engine thread
/// wakes, instead of after (a thread that sleeps on an idle machine takes
/// about 0.25 ms to run again). When it is busy (a turn runs, maybe
/// inflating another transfer's gzip bomb), the caller leaves the job in
/// the `EngineInbox` (its own short lock) and returns; the engine takes it
/// before it sleeps again. A first transfer to an origin (name lookup,
/// connect, TLS set-up) starts on the engine thread.
///
/// A transfer ends when curl finishes it or when its `Cancellation` says
/// it was cancelled (its operation's token, its client's
/// `cancelInFlight()`); its `done` closure then runs on the engine thread,
/// always, with curl's code and no lock held (it may start more
/// transfers). The thread starts with the first transfer and ends when
/// the last handle holding `SharedThreads` is freed (or at
/// appnorth_shutdown); a later hold starts a new engine. A fork() child
/// gets an engine of its own on first use.
///
/// Its end loses nothing (`EngineLeftovers`): what it holds then (in curl,
/// waiting for a place, watched) and what was handed in before it ends,
/// once each, cancelled (`Cancellation.Reason.stopped`), on its thread
/// with no lock held; a hand-off after its end is refused (`add` and
/// `watch` throw), so the caller completes that one itself.
final class TransferEngine: @unchecked Sendable {
    // @unchecked: `core` is touched only with `drive` held; `waker` is
    // callable from any thread.
    struct Job: Sendable {
        let transfer: EasyTransfer
        let done: @Sendable (CURLcode) -> Void
        /// The end of its total timeout, counted from when it was handed
        /// in (nil: none).
        var deadline: Deadline? = nil

        /// Milliseconds of its total timeout left at `now`, rounded up (nil: none).
        func timeoutLeftMs(at now: UInt64) -> Int? { deadline?.remainingMillisecondsRoundedUp(at: now) }

        func timedOut(at now: UInt64) -> Bool { deadline?.hasPassed(at: now) ?? false }
    }

    static let maxHostConnections = 8
    static let sweepIntervalNs: UInt64 = 2_000_000

    private static let current = ForkLocal { () throws(AppNorthError) -> TransferEngine in try start() }

    /// Test seams (none in the library): run at the points where a stop
    /// can meet a hand-off.
    struct Hooks: Sendable {
        /// In `add` and `watch`, after their checks, before the item is handed.
        var beforeHand: (@Sendable () -> Void)? = nil
        /// On the engine thread as it stops, before it ends what it holds.
        var stopping: (@Sendable () -> Void)? = nil
    }

    /// A new engine with its thread (the process's is `shared()`; tests
    /// make their own, with `hooks`).
    static func start(hooks: Hooks = Hooks()) throws(AppNorthError) -> TransferEngine {
        let made = try TransferEngine(hooks: hooks)
        made.startThread()
        return made
    }

    /// The process's engine (a new one in a fork() child, and after the
    /// last `SharedThreads` holder was freed).
    static func shared() throws(AppNorthError) -> TransferEngine { try current.get() }

    /// Takes the engine out (the last `SharedThreads` holder was freed); the caller
    /// stops it.
    static func retire() -> TransferEngine? { current.take(if: { _ in true }) }

    typealias Inbox = EngineInbox<Job, EngineWait>
    /// Held by whoever drives curl: the engine thread for its turns, or a
    /// caller that found it free (`lockedIfFree`; a caller never waits for it).
    private let drive = Lock<Void>((), level: LockClass.transferEngine)
    private let inbox = Lock<Inbox>(Inbox(), level: LockClass.transferInbox)
    private let core: TransferEngineCore
    private let waker: TransferWaker
    private let startFailed = Lock<Bool>(false, level: LockClass.transferStart)
    private let stopping = Atomic<Bool>(false)
    private let hooks: Hooks
    /// Set once, by `startThread` inside the engine's `ForkLocal` make.
    nonisolated(unsafe) private var thread: LibraryThread?

    private init(hooks: Hooks) throws(AppNorthError) {
        self.hooks = hooks
        let wake = try WakeDescriptor.make()
        guard let core = TransferEngineCore(wake: wake, perOrigin: Self.maxHostConnections) else {
            wake.close()
            throw .internal("curl_multi_init failed")
        }
        self.core = core
        waker = TransferWaker(wake: wake)
    }

    private func startThread() {
        do {
            thread = try LibraryThread.spawn("appnorth-xfer", joinable: true, stop: { [weak self] in
                self?.requestStop()
            }) { [self] in loop() }
        } catch {
            // No thread: every transfer handed in fails at once instead of waiting.
            startFailed.withLock { $0 = true }
        }
    }

    /// Hands a transfer to curl (or to the queue of its origin); returns at
    /// once. Its `done` runs later, on the engine thread, exactly once
    /// (cancelled, marked `stoppedByEngine`, if the engine stops first).
    /// Throws, and never calls `done`, when the engine has stopped.
    func add(_ job: Job) throws(AppNorthError) {
        try checkRunning()
        var job = job
        let total = job.transfer.totalTimeoutMs
        job.deadline = total > 0 ? Deadline(milliseconds: total, after: monotonicNow()) : nil
        // From now on a cancel of its operation or client wakes the engine,
        // whether the job runs or waits for a place.
        job.transfer.context.cancellation.attach(waker, key: ObjectIdentifier(job.transfer))
        hooks.beforeHand?()
        // The engine thread picks up a new socket, an earlier curl timer or
        // a job that ended unstarted.
        guard hand(.arrive(job)) else {
            job.transfer.context.cancellation.detach(ObjectIdentifier(job.transfer))
            throw Self.stopped
        }
    }

    private static let stopped = AppNorthError.wrongState("the transfer thread has stopped (its last handle was freed, or appnorth_shutdown)")

    private func checkRunning() throws(AppNorthError) {
        if startFailed.withLock({ $0 }) { throw .internal("cannot start the transfer thread") }
        if stopping.load(ordering: .acquiring) { throw Self.stopped }
    }

    /// Hands `item` to the core on this thread if no one drives curl now
    /// (after what the inbox holds: items keep their order), else leaves it
    /// in the inbox; never waits for the engine's curl work. Wakes the
    /// engine thread when it must look. False: the engine has ended (its
    /// core and inbox are closed, both under `drive`), the item was not
    /// taken and the caller completes it.
    private func hand(_ item: Inbox.Item) -> Bool {
        let core = self.core
        let direct: Bool?? = drive.lockedIfFree { () -> Bool? in
            guard !core.isClosed else { return nil }
            let earlier = self.inbox.withLock { $0.takeAll() }
            var mustWake = false
            for posted in earlier { mustWake = core.accept(posted) || mustWake }
            return core.accept(item) || mustWake
        }
        switch direct {
        case .some(nil): return false
        case .some(let mustWake?):
            if mustWake { waker.wake() }
            return true
        case nil:
            switch inbox.withLock({ $0.post(item) }) {
            case .refused: return false
            case .keptWake: waker.wake()
            case .kept: break
            }
            return true
        }
    }

    // MARK: Waits

    /// Watches `wait` (its deadline and cancellation) until it ends; returns
    /// at once. Its `onEnd` runs later, on the engine thread, exactly once
    /// (`.cancelled(.stopped)` if the engine stops first). Throws, and
    /// never calls `onEnd`, when the engine has stopped.
    func watch(_ wait: EngineWait) throws(AppNorthError) {
        try checkRunning()
        wait.cancellation.attach(waker, key: ObjectIdentifier(wait))
        hooks.beforeHand?()
        guard hand(.watch(wait)) else {
            wait.cancellation.detach(ObjectIdentifier(wait))
            throw Self.stopped
        }
    }

    /// What `wait` waited for happened: it ends `.reached` (on the engine
    /// thread), unless it ended already (a stopped engine ended it).
    /// Callable from any thread.
    func reach(_ wait: EngineWait) {
        _ = hand(.reach(wait))
    }

    // MARK: The engine thread

    private func loop() {
        var watched: [pollfd] = []
        let core = self.core
        while !stopping.load(ordering: .acquiring) {
            let waitMs = drive.locked {
                for item in self.inbox.withLock({ $0.takeAll() }) { _ = core.accept(item) }
                return core.pollSet(into: &watched, now: monotonicNow())
            }
            // An item left after the take above: look again before sleeping.
            let mayWait = inbox.withLock { $0.pollBegins() }
            // A failing poll() (out of memory, say) must not spin the thread.
            if poll(&watched, nfds_t(watched.count), mayWait ? waitMs : 0) < 0 && errno != EINTR { usleep(1000) }
            inbox.withLock { $0.pollEnded() }
            let ended = drive.locked {
                for item in self.inbox.withLock({ $0.takeAll() }) { _ = core.accept(item) }
                return core.turn(after: watched, now: monotonicNow())
            }
            finish(ended)
        }
        // In one turn of `drive`: the inbox's last items and everything the
        // core holds are taken, the inbox and the core closed (a hand-off
        // from now on is refused to its caller); then each ends, once, with
        // no lock held (EngineLeftovers).
        finish(drive.locked {
            hooks.stopping?()
            return core.stop(leaving: self.inbox.withLock { $0.close() })
        })
    }

    private func finish(_ ended: TransferEngineCore.Ended) {
        for (job, code) in ended.jobs { end(job, code) }
        for (wait, how) in ended.waits { end(wait, how) }
    }

    /// Asks the engine thread to end after its current turn; what it holds
    /// then ends cancelled, and it closes curl's multi handle as it ends.
    private func requestStop() {
        stopping.store(true, ordering: .releasing)
        waker.wake()
    }

    /// Ends the engine thread and waits for it (unless called on it).
    func stop() {
        requestStop()
        thread?.join()
    }

    /// The job's last step, with no lock held: no wake-up reaches it any
    /// more; then its `done`.
    private func end(_ job: Job, _ code: CURLcode) {
        job.transfer.context.cancellation.detach(ObjectIdentifier(job.transfer))
        job.done(code)
    }

    private func end(_ wait: EngineWait, _ how: EngineWait.End) {
        wait.cancellation.detach(ObjectIdentifier(wait))
        wait.onEnd(how)
    }
}

extension LockClass {
    /// `TransferEngine.drive`: curl's multi handle and the engine's transfers (the engine
    /// thread's turns; a caller only tries it).
    static let transferEngine = LockClass(rank: 95, "TransferEngine.drive")
    /// `TransferEngine.inbox`: what callers leave for a busy engine thread.
    static let transferInbox = LockClass.leaf("TransferEngine.inbox")
    /// `TransferEngine.startFailed`: whether the engine's thread failed to start.
    static let transferStart = LockClass.leaf("TransferEngine.startFailed")
}
