import CCurl
import CSystem
import Glibc

/// Runs the non-blocking transfers of the whole process on one library
/// thread, with one curl multi handle: any number of transfers in flight,
/// one thread (curl's multi interface), no thread per operation.
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
/// A transfer ends when curl finishes it, when its operation's cancellation
/// is cancelled, or when its client's `cancelInFlight()` runs; its `done`
/// closure then runs on the engine thread with curl's code, with no lock
/// held (it may start more transfers). The thread starts with the first
/// transfer and lives as long as the process (like curl's global state: a
/// host that exits with transfers in flight must not crash). A fork()
/// child gets an engine of its own on first use.
final class TransferEngine: @unchecked Sendable {
    // @unchecked: `running` is touched only by the engine thread; `incoming`
    // is behind its lock; `multi` is used by the engine thread, except
    // curl_multi_wakeup, which any thread may call.
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

    private static let current = Lock<(generation: UInt64, engine: TransferEngine?)>((0, nil))

    /// The process's engine (a new one in a fork() child).
    static func shared() throws(AppNorthError) -> TransferEngine {
        let generation = ForkGuard.generation
        if let engine = current.withLock({ $0.generation == generation ? $0.engine : nil }) { return engine }
        let made = try TransferEngine()
        return current.withLock { state in
            if state.generation == generation, let engine = state.engine { return engine }
            state = (generation, made)
            made.startThread()
            return made
        }
    }

    private let multi: UnsafeMutableRawPointer
    private let incoming = Lock<[Job]>([])
    private var running: [UnsafeMutableRawPointer: Job] = [:]
    private var admission = AdmissionQueue<Job>(perOrigin: maxHostConnections)

    private init() throws(AppNorthError) {
        guard let multi = curl_multi_init() else { throw .internal("curl_multi_init failed") }
        self.multi = multi
        cshim_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, Self.maxHostConnections)
        cshim_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.maxHostConnections * 2)
    }

    private func startThread() {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attributes) }
        let rc = pthread_create(&thread, &attributes, { raw in
            let engine = Unmanaged<TransferEngine>.fromOpaque(raw!).takeRetainedValue()
            appnorth_set_thread_name("appnorth-xfer")
            engine.loop()
            return nil
        }, context)
        if rc != 0 {
            // No thread: every transfer handed in fails at once instead of waiting.
            Unmanaged<TransferEngine>.fromOpaque(context).release()
            startFailed.withLock { $0 = true }
        }
    }

    private let startFailed = Lock<Bool>(false)

    /// Hands a transfer to the engine thread; returns at once.
    func add(_ job: Job) throws(AppNorthError) {
        if startFailed.withLock({ $0 }) { throw .internal("cannot start the transfer thread") }
        var job = job
        let total = job.transfer.totalTimeoutMs
        job.deadline = total > 0 ? Deadline(milliseconds: total, after: monotonicNow()) : nil
        incoming.withLock { $0.append(job) }
        curl_multi_wakeup(multi)
    }

    // MARK: The engine thread

    private func loop() {
        var active: Int32 = 0
        var lastSweep: UInt64 = 0
        var nextWaitingDeadline: Deadline? = nil
        while true {
            admit()
            curl_multi_perform(multi, &active)
            collect()
            // A cancel wakes the loop; looking at every transfer on each
            // turn would cost O(transfers) per socket event, so at most
            // every `sweepIntervalNs` (a cancel ends within that).
            let now = monotonicNow()
            let sweepDue = now &- lastSweep >= Self.sweepIntervalNs
            if sweepDue {
                lastSweep = now
                nextWaitingDeadline = sweep(now: now)
            }
            // curl_multi_poll waits no longer than curl's own next timeout;
            // with nothing in flight only a wakeup (a new transfer) ends it.
            // A turn that skipped the sweep comes back for it soon; a job
            // waiting for a place comes back at its deadline.
            var waitMs: Int32 = running.isEmpty && admission.isEmpty ? 3_600_000 : (sweepDue ? 1000 : 2)
            if let deadline = nextWaitingDeadline {
                waitMs = min(waitMs, Int32(clamping: deadline.sleepMilliseconds(at: now)))
            }
            curl_multi_poll(multi, nil, 0, waitMs, nil)
        }
    }

    private func admit() {
        let jobs = incoming.withLock { jobs -> [Job] in
            defer { jobs.removeAll(keepingCapacity: true) }
            return jobs
        }
        for job in jobs {
            // From now on a cancel of its operation or client wakes this
            // loop, whether the job runs or waits for a place.
            let context = job.transfer.context
            context.operation?.attach(multi)
            context.inFlight?.register(ObjectIdentifier(job.transfer), multi: multi)
            startInTurn(admission.arrive(job, origin: job.transfer.origin))
        }
    }

    /// Starts `job` (a job that holds a place), and on down the queue while
    /// a started one ends at once.
    private func startInTurn(_ job: Job?) {
        var next = job
        while let job = next { next = start(job) }
    }

    /// Hands a job to curl, or ends it at once if it was cancelled or its
    /// total timeout ran out while it waited its turn; then returns the job
    /// that takes its place.
    private func start(_ job: Job) -> Job? {
        let transfer = job.transfer
        // Cancelled before it started: send nothing.
        if transfer.context.isCancelled { return endUnstarted(job, CURLE_ABORTED_BY_CALLBACK) }
        if let left = job.timeoutLeftMs(at: monotonicNow()) {
            guard left > 0 else { return endUnstarted(job, CURLE_OPERATION_TIMEDOUT) }
            if left < transfer.totalTimeoutMs { transfer.setTotalTimeout(milliseconds: left) }
        }
        guard curl_multi_add_handle(multi, transfer.handle) == CURLM_OK else {
            return endUnstarted(job, CURLE_FAILED_INIT)
        }
        running[transfer.handle] = job
        return nil
    }

    /// Ends a job that held a place but never reached curl; returns the one
    /// that takes its place.
    private func endUnstarted(_ job: Job, _ code: CURLcode) -> Job? {
        end(job, code)
        return admission.leave(origin: job.transfer.origin)
    }

    private func collect() {
        var finished: [(UnsafeMutableRawPointer, CURLcode)] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let h = message.pointee.easy_handle else { continue }
            finished.append((h, message.pointee.data.result))
        }
        for (h, code) in finished { complete(h, code) }
    }

    /// Ends the cancelled transfers, and the waiting jobs that were
    /// cancelled or whose total timeout ran out (as curl would end them);
    /// returns the nearest deadline of the jobs still waiting.
    private func sweep(now: UInt64) -> Deadline? {
        let cancelled = running.compactMap { $0.value.transfer.context.isCancelled ? $0.key : nil }
        for h in cancelled { complete(h, CURLE_ABORTED_BY_CALLBACK) }
        guard !admission.isEmpty else { return nil }
        var nearest: Deadline? = nil
        let ended = admission.removeWaiting { job in
            if job.transfer.context.isCancelled || job.timedOut(at: now) { return true }
            if let deadline = job.deadline { nearest = min(nearest ?? deadline, deadline) }
            return false
        }
        for job in ended {
            end(job, job.transfer.context.isCancelled ? CURLE_ABORTED_BY_CALLBACK : CURLE_OPERATION_TIMEDOUT)
        }
        return nearest
    }

    private func complete(_ h: UnsafeMutableRawPointer, _ code: CURLcode) {
        guard let job = running.removeValue(forKey: h) else { return }
        curl_multi_remove_handle(multi, h)
        end(job, code)
        startInTurn(admission.leave(origin: job.transfer.origin))
    }

    /// The job's last step: no wake-up reaches it any more; then its `done`.
    private func end(_ job: Job, _ code: CURLcode) {
        let context = job.transfer.context
        context.operation?.detach()
        context.inFlight?.unregister(ObjectIdentifier(job.transfer))
        job.done(code)
    }
}
