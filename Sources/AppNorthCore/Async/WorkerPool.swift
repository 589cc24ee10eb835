/// A few library threads that run jobs in the order they came: threads
/// start on demand, up to `maxThreads`, while the waiting jobs outnumber
/// the idle threads (so one job's long network call never holds up
/// another's); jobs beyond the cap wait their turn. With an
/// `idleMilliseconds`, a thread ends after that long without work;
/// without, it lives as long as the process.
///
/// Two pools use it: the non-blocking C calls' workers (`OperationWorkers`:
/// 2 threads, ended by `stop()` with the last `SharedThreads` holder) and the Swift product's async calls
/// (`BlockingWorkers`: 32 threads, ending after 10 s idle). A thread
/// parked in `whileWaiting` (waiting for a host's async storage, which may
/// itself need a worker) does not count against the cap.
package final class WorkerPool: @unchecked Sendable {
    // @unchecked: every mutable field is touched only with `condition` locked.
    package let maxThreads: Int
    let idleMilliseconds: Int?
    let threadName: String
    private let condition = Lock<Void>((), level: LockLevel.workerPool)
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0  // index of the oldest job in `jobs`
    private var threads = 0
    private var idle = 0
    private var parked = 0
    /// `stop()` was called: the threads end once no job is left.
    private var stopping = false
    /// The threads started and not yet ended or detached (joined by `stop`).
    private var spawned: [LibraryThread] = []

    package init(maxThreads: Int, idleMilliseconds: Int?, threadName: String) {
        self.maxThreads = max(1, maxThreads)
        self.idleMilliseconds = idleMilliseconds.map { max(0, $0) }
        self.threadName = threadName
    }

    /// Runs `job` on a worker, soon. False, and `job` is dropped, only when
    /// no worker runs and none could be started.
    @discardableResult
    package func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.locked {
            guard !stopping else { return false }
            jobs.append(job)
            condition.broadcast()
            if startThreadIfNeeded() || threads > 0 { return true }
            // No thread at all to run it: take it back.
            jobs.removeLast()
            return false
        }
    }

    /// Runs `wait` (a wait for async host code) with this worker parked:
    /// not counted against `maxThreads` meanwhile.
    package func whileWaiting<T>(_ wait: () throws -> T) rethrows -> T {
        condition.locked {
            parked += 1
            _ = startThreadIfNeeded()
        }
        defer { condition.locked { parked -= 1 } }
        return try wait()
    }

    /// Asks every thread to end once no job is left (for a process-wide stop).
    func requestStop() {
        condition.locked {
            stopping = true
            condition.broadcast()
        }
    }

    /// Ends every thread once the jobs queued now have run, and waits for
    /// them (not for the calling thread, if it is one: it ends on return).
    /// Jobs submitted afterwards are refused. For a pool no one uses any more.
    func stop() {
        let threads = condition.locked { () -> [LibraryThread] in
            stopping = true
            condition.broadcast()
            defer { spawned.removeAll() }
            return spawned
        }
        for thread in threads { thread.join() }
    }

    /// Threads started and not yet ended, parked ones included (for tests).
    package var threadCount: Int { condition.locked { threads } }

    /// With the lock held: starts a thread when the waiting jobs outnumber
    /// the idle threads and the cap allows. False when none was needed or
    /// none could start.
    private func startThreadIfNeeded() -> Bool {
        guard jobs.count - next > idle && threads - parked < maxThreads else { return false }
        do {
            spawned.append(try LibraryThread.spawn(threadName, joinable: true, stop: { [weak self] in
                self?.requestStop()
            }) { [self] in work() })
        } catch {
            return false
        }
        threads += 1
        return true
    }

    private func work() {
        condition.locked {
            while true {
                if next < jobs.count {
                    // The queue lets go of the job here and this thread
                    // after running it, with no lock held: what it captured
                    // (a handle's last reference, closing its database)
                    // must not go under the pool's lock.
                    var job: (@Sendable () -> Void)? = jobs[next]
                    jobs[next] = {}
                    next += 1
                    if next == jobs.count {
                        jobs.removeAll(keepingCapacity: true)
                        next = 0
                    }
                    condition.unlocked {
                        job?()
                        job = nil
                    }
                    continue
                }
                if stopping {
                    threads -= 1
                    return  // `stop` joins it
                }
                idle += 1
                let deadline = idleMilliseconds.map { Deadline.fromNow(milliseconds: $0) }
                condition.wait(until: { next < jobs.count || stopping }, deadline: deadline)
                idle -= 1
                if deadline != nil && next >= jobs.count && !stopping {
                    threads -= 1
                    // Idle: it ends on its own (detached).
                    if let me = spawned.firstIndex(where: \.isCurrent) { spawned.remove(at: me).join() }
                    return
                }
            }
        }
    }
}
