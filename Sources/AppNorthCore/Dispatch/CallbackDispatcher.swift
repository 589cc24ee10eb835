import CSystem
import Glibc
import Synchronization

/// The queue of host callbacks of a dispatch-mode client (the C header's
/// "Dispatch mode"): library threads post what they would have called, and
/// the host runs it with `dispatch(max:)` on a thread of its own choosing.
///
/// - `hasPending` and a `dispatch` with nothing queued are one atomic load:
///   no lock, no system call (a game calls it every frame).
/// - `descriptor` is an eventfd that is readable while something is queued
///   (written when the queue stops being empty, drained when it empties),
///   for poll/epoll/asyncio's add_reader.
/// - Bounded where it may be: log lines past `logLimit` lines, or past
///   `logBytesLimit` bytes of text waiting, are dropped and counted, and
///   the next dispatch runs one line saying how many (a server's message
///   reaches a line only as a bounded excerpt: `HTTPResponse.serverMessage`). Jobs
///   (`post`: completions, listener deliveries) are never dropped while the
///   dispatcher is open; a config's listener delivery is one job at most
///   (ListenerRegistry coalesces its changes), so the queue stays bounded
///   by what the host has asked for.
/// - One thread dispatches at a time; a dispatch from inside a callback, or
///   while another thread dispatches, runs nothing and returns 0.
/// - `close` (the client's free) closes the descriptor and drops the queued
///   log lines and listener deliveries, but runs the queued completions
///   (`post`) on the calling thread before it returns: completions are
///   never dropped (docs/threading.md). Called while a dispatch runs (from
///   inside one of its callbacks, or on another thread), it leaves them to
///   that dispatch, which runs them, and only them, after its current job.
///   Later posts return false.
///
/// No lock is held while a job runs.
package final class CallbackDispatcher: Sendable {
    package static let defaultLogLimit = 1000
    /// 1 MiB of log text waiting at most (1,000 lines of 1 KiB).
    package static let defaultLogBytesLimit = 1 << 20

    enum Job: Sendable {
        case log(LogLevel, String, Logger.Sink)
        /// A host callback (a completion): counts one.
        case run(@Sendable () -> Void)
        /// Runs as many host callbacks as it returns (a listener delivery).
        case counted(@Sendable () -> Int)
    }

    struct State: Sendable {
        var jobs: [Job] = []
        var head = 0
        var logsQueued = 0
        var logBytesQueued = 0
        var dropped = 0
        var droppedSink: Logger.Sink?
        /// The eventfd holds a nonzero count.
        var signalled = false
        var closed = false
        /// The thread running a dispatch (0: none).
        var dispatcher: UInt = 0
        /// Completions queued when `close` ran during a dispatch: that
        /// dispatch runs them.
        var orphans: [@Sendable () -> Void] = []

        var queued: Int { jobs.count - head + (dropped > 0 ? 1 : 0) }
    }

    package let logLimit: Int
    package let logBytesLimit: Int
    private let wake: WakeDescriptor
    private let state = Lock(State(), level: LockClass.dispatcher)
    /// `State.queued`, stored under the lock, read without it.
    private let pending = Atomic<Int>(0)
    private let closedFlag = Atomic<Bool>(false)

    package init(logLimit: Int = CallbackDispatcher.defaultLogLimit,
                 logBytesLimit: Int = CallbackDispatcher.defaultLogBytesLimit) throws(AppNorthError) {
        guard logLimit >= 1 else { throw .invalidArgument("the dispatch log limit must be at least 1") }
        guard logBytesLimit >= 1 else { throw .invalidArgument("the dispatch log byte limit must be at least 1") }
        wake = try WakeDescriptor.make()
        self.logLimit = logLimit
        self.logBytesLimit = logBytesLimit
    }

    /// Without a close (a Swift host that never closed it): whatever is
    /// left is dropped, since the last reference may go on any thread.
    deinit { _ = shutDown() }

    /// The eventfd: readable while something is queued. Valid until
    /// `close()`; the host must not read, write or close it.
    package var descriptor: Int32 { wake.fd }

    /// Something is queued (one atomic load).
    package var hasPending: Bool { pending.load(ordering: .acquiring) > 0 }

    /// How many jobs are queued (the summary of dropped log lines counts one).
    package var queuedCount: Int { pending.load(ordering: .acquiring) }

    package var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    /// Queues a job that the next dispatch runs. Never dropped while the
    /// dispatcher is open; returns false (and drops it) after `close()`.
    @discardableResult
    package func post(_ job: @escaping @Sendable () -> Void) -> Bool {
        enqueue(.run(job))
    }

    /// Queues a job that runs `n` host callbacks (the `n` it returns).
    @discardableResult
    func postCounted(_ job: @escaping @Sendable () -> Int) -> Bool {
        enqueue(.counted(job))
    }

    /// Queues a log line for `sink`; past `logLimit` queued lines or
    /// `logBytesLimit` queued bytes it is dropped and counted.
    func postLog(_ level: LogLevel, _ message: String, to sink: @escaping Logger.Sink) {
        let bytes = message.utf8.count
        state.withLock { s in
            guard !s.closed else { return }
            if s.logsQueued >= logLimit || s.logBytesQueued + bytes > logBytesLimit {
                s.dropped += 1
                if s.droppedSink == nil { s.droppedSink = sink }
            } else {
                s.jobs.append(.log(level, message, sink))
                s.logsQueued += 1
                s.logBytesQueued += bytes
            }
            published(&s)
        }
    }

    private func enqueue(_ job: Job) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            s.jobs.append(job)
            published(&s)
            return true
        }
    }

    /// With the lock held: publishes the count and keeps the descriptor
    /// readable exactly while something is queued.
    private func published(_ s: inout State) {
        let queued = s.queued
        pending.store(queued, ordering: .releasing)
        if queued > 0 && !s.signalled {
            s.signalled = true
            wake.signal()
        } else if queued == 0 && s.signalled {
            s.signalled = false
            wake.drain()
        }
    }

    /// Runs queued jobs on this thread, in order: `max` 0 runs those queued
    /// when the call began (not those the jobs queue), `max` > 0 at most
    /// that many. Returns how many host callbacks ran.
    package func dispatch(max: Int = 0) -> Int {
        guard pending.load(ordering: .acquiring) > 0 else { return 0 }
        let me = UInt(pthread_self())
        let batch = state.withLock { s -> [Job]? in
            // Closed, nested in a callback, or another thread dispatching.
            guard !s.closed, s.dispatcher == 0 else { return nil }
            let taken = take(&s, max: max)
            if !taken.isEmpty { s.dispatcher = me }
            return taken
        }
        guard let batch, !batch.isEmpty else { return 0 }
        var ran = 0
        for job in batch {
            // A callback (or another thread) may have freed the client: then
            // only the completions run, nothing else.
            if isClosed {
                if case .run(let body) = job {
                    body()
                    ran += 1
                }
                continue
            }
            switch job {
            case .log(let level, let message, let sink):
                sink(level, message)
                ran += 1
            case .run(let body):
                body()
                ran += 1
            case .counted(let body):
                ran += body()
            }
        }
        // Completions that a close during this dispatch left to it.
        while let orphans = state.withLock({ s -> [@Sendable () -> Void]? in
            guard !s.orphans.isEmpty else {
                s.dispatcher = 0
                return nil
            }
            defer { s.orphans.removeAll() }
            return s.orphans
        }) {
            for body in orphans { body() }
            ran += orphans.count
        }
        return ran
    }

    /// With the lock held: removes up to `max` jobs (0: all), plus the line
    /// saying how many log lines were dropped.
    private func take(_ s: inout State, max: Int) -> [Job] {
        let available = s.jobs.count - s.head
        let count = max <= 0 ? available : Swift.min(max, available)
        var batch = Array(s.jobs[s.head..<(s.head + count)])
        s.head += count
        if s.head == s.jobs.count {
            s.jobs.removeAll(keepingCapacity: s.jobs.count <= 4096)
            s.head = 0
        } else if s.head >= 1024 && s.head * 2 >= s.jobs.count {
            s.jobs.removeFirst(s.head)
            s.head = 0
        }
        for job in batch {
            if case .log(_, let message, _) = job {
                s.logsQueued -= 1
                s.logBytesQueued -= message.utf8.count
            }
        }
        if s.dropped > 0, max <= 0 || batch.count < max, let sink = s.droppedSink {
            let line = "dispatch: \(s.dropped) log line(s) dropped: more than \(logLimit) lines or \(logBytesLimit) bytes "
                + "were waiting for appnorth_dispatch()"
            batch.append(.log(.warning, line, sink))
            s.dropped = 0
            s.droppedSink = nil
        }
        published(&s)
        return batch
    }

    /// Closes the dispatcher (the client's free): later posts return false,
    /// the descriptor is closed, queued log lines and listener deliveries
    /// are dropped, and the queued completions run, on this thread before it
    /// returns, or, while a dispatch runs, in that dispatch after its current
    /// job. Returns how many completions ran here. Idempotent.
    @discardableResult
    package func close() -> Int {
        let completions = shutDown()
        for body in completions { body() }
        return completions.count
    }

    /// Marks the dispatcher closed and empties it; returns the completions
    /// the caller must run (none while a dispatch runs: it gets them).
    private func shutDown() -> [@Sendable () -> Void] {
        state.withLock { s in
            guard !s.closed else { return [] }
            s.closed = true
            closedFlag.store(true, ordering: .releasing)
            var completions: [@Sendable () -> Void] = []
            for job in s.jobs[s.head...] { if case .run(let body) = job { completions.append(body) } }
            s.jobs.removeAll()
            s.head = 0
            s.logsQueued = 0
            s.logBytesQueued = 0
            s.dropped = 0
            s.droppedSink = nil
            pending.store(0, ordering: .releasing)
            wake.close()
            guard s.dispatcher == 0 else {
                s.orphans += completions
                return []
            }
            return completions
        }
    }
}

extension Logger {
    /// This logger with its lines queued on `dispatcher` instead of passed
    /// to the sink on the logging thread; shares this logger's level.
    package func routed(through dispatcher: CallbackDispatcher) -> Logger {
        guard let sink else { return self }
        return Logger(level: level, sink: { level, message in
            dispatcher.postLog(level, message, to: sink)
        })
    }
}

extension LockClass {
    /// `CallbackDispatcher.state`: dispatch mode's queues.
    static let dispatcher = LockClass.leaf("CallbackDispatcher.state")
}
