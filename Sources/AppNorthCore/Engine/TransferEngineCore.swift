import CCurl
import CSystem
import Glibc

/// The state of `TransferEngine` behind its lock: the multi handle, the
/// sockets and timer curl asked it to watch, the transfers in curl's hands,
/// the jobs waiting for a place, the waits it watches (`EngineWait`), and
/// the jobs and waits that ended, which the engine thread finishes once
/// the lock is released.
///
/// Every method runs with the engine's lock held, on whichever thread holds
/// it (curl's socket and timer callbacks run inside curl calls made here, so
/// they find the lock held too). Nothing here calls a job's `done`.
final class TransferEngineCore: @unchecked Sendable {
    typealias Job = TransferEngine.Job

    private let multi: UnsafeMutableRawPointer
    private let wake: WakeDescriptor
    /// What curl wants watched: socket → poll() events.
    private var sockets: [Int32: Int16] = [:]
    /// When curl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT) (nil: never).
    private var timerAt: UInt64? = nil
    private var running: [UnsafeMutableRawPointer: Job] = [:]
    private var admission: AdmissionQueue<Job>
    /// Origins that answered this engine: their name lookup and connection
    /// are in curl's caches, so a new transfer is sent on the caller's thread.
    private var warmOrigins: Set<String> = []
    private var ended = Ended()
    private var waits: [ObjectIdentifier: EngineWait] = [:]

    /// What a turn hands the engine thread to finish, with no lock held.
    struct Ended {
        var jobs: [(Job, CURLcode)] = []
        var waits: [(EngineWait, EngineWait.End)] = []
        var isEmpty: Bool { jobs.isEmpty && waits.isEmpty }
    }
    /// When the engine thread sleeps, wakes and sweeps (a pure value).
    private var schedule = EngineSchedule(sweepIntervalNs: TransferEngine.sweepIntervalNs)
    private var closed = false

    private static let maxWarmOrigins = 64

    init?(wake: WakeDescriptor, perOrigin: Int) {
        guard let multi = cshim_multi_init_cloexec() else { return nil }
        self.multi = multi
        self.wake = wake
        admission = AdmissionQueue(perOrigin: perOrigin)
        cshim_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perOrigin)
        cshim_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, perOrigin * 2)
        // The core lives as long as its engine, whose thread calls stop() as it ends.
        cshim_multi_set_event_callbacks(multi, { _, socket, what, user, _ in
            Unmanaged<TransferEngineCore>.fromOpaque(user!).takeUnretainedValue().curlWatches(socket, what)
            return 0
        }, { _, timeoutMs, user in
            Unmanaged<TransferEngineCore>.fromOpaque(user!).takeUnretainedValue().setTimer(timeoutMs)
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The engine's thread ends: everything the core holds, and `inbox`
    /// (the inbox's last items), is returned to be ended, once each, by the
    /// rule of `EngineLeftovers` (jobs `CURLE_ABORTED_BY_CALLBACK`, marked
    /// stopped; waits reached, or cancelled with `.stopped` unless their
    /// own cancel came first); what ended before stays as it ended. Then
    /// curl's multi handle, with its cached connections, is closed, and
    /// every later `accept` is refused (`isClosed`). The eventfd stays open
    /// until the core goes: a caller whose hand-off is refused may still
    /// hold its waker. Once only.
    func stop(leaving inbox: [TransferEngine.Inbox.Item]) -> Ended {
        guard !closed else { return Ended() }
        closed = true
        let left = EngineLeftovers(running: Array(running.values), waiting: admission.removeWaiting { _ in true },
                                   watched: Array(waits.values), inbox: inbox, key: ObjectIdentifier.init)
        for easy in running.keys { curl_multi_remove_handle(multi, easy) }
        curl_multi_cleanup(multi)
        running = [:]
        waits = [:]
        var out = ended
        ended = Ended()
        for job in left.jobs {
            job.transfer.context.end(.engineStopped)
            out.jobs.append((job, CURLE_ABORTED_BY_CALLBACK))
        }
        for (wait, reached) in left.waits { out.waits.append((wait, reached ? .reached : wait.cancelled ?? .cancelled(.stopped))) }
        return out
    }

    /// `stop` ran: the core accepts nothing more.
    var isClosed: Bool { closed }

    deinit {
        if !closed { curl_multi_cleanup(multi) }
        wake.close()
    }

    // MARK: curl's callbacks

    private func curlWatches(_ socket: Int32, _ what: Int32) {
        let events: Int16? = switch what {
        case CURL_POLL_IN: Int16(POLLIN)
        case CURL_POLL_OUT: Int16(POLLOUT)
        case CURL_POLL_INOUT: Int16(POLLIN | POLLOUT)
        default: nil  // CURL_POLL_REMOVE
        }
        // A socket no longer watched may stay in the engine's poll() set
        // until its next turn (which ignores it); a new one must join it.
        if let events, sockets[socket] != events { _ = schedule.handle(.socketWatched) }
        sockets[socket] = events
    }

    private func setTimer(_ timeoutMs: Int) {
        timerAt = timeoutMs < 0 ? nil : Deadline(milliseconds: timeoutMs, after: monotonicNow()).nanoseconds
        _ = schedule.handle(.timerSet(at: timerAt))
    }

    // MARK: From the caller's thread

    /// An item a caller handed in (directly, or through the inbox), while
    /// the core is open (`isClosed`). Returns whether the engine thread
    /// must wake to carry on.
    func accept(_ item: TransferEngine.Inbox.Item) -> Bool {
        switch item {
        case .arrive(let job): arrive(job)
        case .watch(let wait): watch(wait)
        case .reach(let wait): reach(wait)
        }
    }

    /// A new job: it starts now (on this thread, when its origin is warm)
    /// or waits for a place. Returns whether the engine thread must wake to
    /// carry on (a job that only waits for a place does not need it: the
    /// engine is busy with that origin's transfers).
    func arrive(_ job: Job) -> Bool {
        let origin = job.transfer.origin
        startInTurn(admission.arrive(job, origin: origin))
        if warmOrigins.contains(origin) {
            runTimerIfDue(now: monotonicNow())
            // curl may have finished other transfers meanwhile: their
            // `done` is the engine thread's to run.
            collect()
        }
        if !ended.isEmpty { _ = schedule.handle(.endedOutsideTurn) }
        return schedule.handle(.callerDone) == .wake
    }

    // MARK: From the engine thread

    /// Fills `watched` with the eventfd and curl's sockets; returns how long
    /// poll() may wait, in ms.
    func pollSet(into watched: inout [pollfd], now: UInt64) -> Int32 {
        watched.removeAll(keepingCapacity: true)
        watched.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0))
        for (socket, events) in sockets { watched.append(pollfd(fd: socket, events: events, revents: 0)) }
        let load = EngineSchedule.Load(idle: running.isEmpty && admission.isEmpty && waits.isEmpty, timerAt: timerAt,
                                       nearestWait: waits.values.map(\.deadline).min(), endedPending: !ended.isEmpty,
                                       admissionEmpty: admission.isEmpty)
        guard case .poll(let waitMs) = schedule.handle(.pollBegins(now: now, load)) else { return 0 }
        return Int32(clamping: waitMs)
    }

    /// One turn after poll() returned: curl's socket events and timer, the
    /// transfers that finished, the sweep. Returns the jobs that ended.
    func turn(after watched: [pollfd], now: UInt64) -> Ended {
        _ = schedule.handle(.turnBegins)
        var count: Int32 = 0
        for entry in watched where entry.revents != 0 {
            if entry.fd == wake.fd {
                wake.drain()
            } else if sockets[entry.fd] != nil {
                curl_multi_socket_action(multi, entry.fd, Self.selectMask(entry.revents), &count)
            }
        }
        runTimerIfDue(now: now)
        collect()
        // Jobs that took a place freed just now send their requests in this
        // turn, not after one more trip through poll().
        runTimerIfDue(now: monotonicNow())
        collect()
        if schedule.handle(.turnEnds(now: now)) == .sweep {
            _ = schedule.handle(.swept(nextWaiting: sweep(now: now)))
        }
        defer { ended = Ended() }
        return ended
    }

    private static func selectMask(_ revents: Int16) -> Int32 {
        var mask: Int32 = 0
        if revents & Int16(POLLIN | POLLHUP) != 0 { mask |= CURL_CSELECT_IN }
        if revents & Int16(POLLOUT) != 0 { mask |= CURL_CSELECT_OUT }
        if revents & Int16(POLLERR | POLLNVAL) != 0 { mask |= CURL_CSELECT_ERR }
        return mask
    }

    /// Lets curl run what its timer asked for (a new transfer's first
    /// steps among them), as long as it asks for it now.
    private func runTimerIfDue(now: UInt64) {
        var count: Int32 = 0
        while let at = timerAt, at <= now {
            timerAt = nil
            cshim_multi_socket_timeout(multi, &count)
        }
    }

    // MARK: Waits

    /// Watches `wait` from now on. Returns whether the engine thread must wake.
    func watch(_ wait: EngineWait) -> Bool {
        if let how = wait.cancelled {
            ended.waits.append((wait, how))
            _ = schedule.handle(.endedOutsideTurn)
        } else {
            waits[ObjectIdentifier(wait)] = wait
            _ = schedule.handle(.waitWatched(deadline: wait.deadline))
        }
        return schedule.handle(.callerDone) == .wake
    }

    /// The awaited thing happened: `wait` ends `.reached`, unless it already
    /// ended. Returns whether the engine thread must wake.
    func reach(_ wait: EngineWait) -> Bool {
        guard waits.removeValue(forKey: ObjectIdentifier(wait)) != nil else { return false }
        ended.waits.append((wait, .reached))
        _ = schedule.handle(.endedOutsideTurn)
        return schedule.handle(.callerDone) == .wake
    }

    /// Ends the waits that were cancelled or whose deadline passed.
    private func sweepWaits(now: UInt64) {
        guard !waits.isEmpty else { return }
        for (key, wait) in waits {
            let how = wait.cancelled ?? (wait.deadline.hasPassed(at: now) ? .timedOut : nil)
            guard let how else { continue }
            waits[key] = nil
            ended.waits.append((wait, how))
        }
    }

    // MARK: Places, starts and ends

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
        ended.jobs.append((job, code))
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
        sweepWaits(now: now)
        guard !admission.isEmpty else { return nil }
        var nearest: Deadline? = nil
        let expired = admission.removeWaiting { job in
            if job.transfer.context.isCancelled || job.timedOut(at: now) { return true }
            if let deadline = job.deadline { nearest = min(nearest ?? deadline, deadline) }
            return false
        }
        for job in expired {
            ended.jobs.append((job, job.transfer.context.isCancelled ? CURLE_ABORTED_BY_CALLBACK : CURLE_OPERATION_TIMEDOUT))
        }
        return nearest
    }

    private func complete(_ h: UnsafeMutableRawPointer, _ code: CURLcode) {
        guard let job = running.removeValue(forKey: h) else { return }
        curl_multi_remove_handle(multi, h)
        let origin = job.transfer.origin
        if code == CURLE_OK && !warmOrigins.contains(origin) {
            if warmOrigins.count >= Self.maxWarmOrigins { warmOrigins.removeAll() }
            warmOrigins.insert(origin)
        }
        ended.jobs.append((job, code))
        startInTurn(admission.leave(origin: origin))
    }
}
