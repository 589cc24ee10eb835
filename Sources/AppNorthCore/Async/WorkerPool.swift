/// A few library threads that run jobs in the order they came: threads
/// start on demand, up to `maxThreads`, while the jobs that may run
/// outnumber the idle threads (so one job's long network call never holds
/// up another's); jobs beyond the cap wait their turn. A job may name a
/// share (the non-blocking calls name their client): at most
/// `perShare` jobs of one share run at once (`WorkShares`), so one client
/// whose server never answers cannot take every thread. With an
/// `idleMilliseconds`, a thread ends after that long without work;
/// without, it lives as long as the process.
///
/// Two pools use it: the non-blocking C calls' workers (`OperationWorkers`:
/// 8 threads, 2 per client, ended by `stop()` with the last `SharedThreads`
/// holder) and the Swift product's async calls (`BlockingWorkers`: 32
/// threads, no shares, ending after 10 s idle). A thread parked in
/// `whileWaiting` (waiting for a host's async storage, which may itself
/// need a worker) does not count against the cap.
package final class WorkerPool: @unchecked Sendable {
    // @unchecked: every mutable field is touched only with `condition` locked.
    package let maxThreads: Int
    let idleMilliseconds: Int?
    let threadName: String
    private let condition = Lock<Void>((), level: LockClass.workerPool)
    private var jobs: WorkShares<ObjectIdentifier, @Sendable () -> Void>
    private var threads = 0
    private var idle = 0
    private var parked = 0
    /// `stop()` was called: the threads end once no job is left.
    private var stopping = false
    /// The threads started and not yet ended or detached (joined by `stop`).
    private var spawned: [LibraryThread] = []

    package init(maxThreads: Int, perShare: Int = 1, idleMilliseconds: Int?, threadName: String) {
        self.maxThreads = max(1, maxThreads)
        jobs = WorkShares(perShare: perShare)
        self.idleMilliseconds = idleMilliseconds.map { max(0, $0) }
        self.threadName = threadName
    }

    /// Runs `job` on a worker, soon (once fewer than `perShare` jobs of
    /// `share` run; nil: no limit). False, and `job` is dropped, only when
    /// no worker runs and none could be started.
    @discardableResult
    package func submit(share: ObjectIdentifier? = nil, _ job: @escaping @Sendable () -> Void) -> Bool {
        condition.locked {
            guard !stopping else { return false }
            jobs.add(job, share: share)
            condition.broadcast()
            if startThreadIfNeeded() || threads > 0 { return true }
            // No thread at all to run it: take it back.
            jobs.removeNewest(share: share)
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

    /// With the lock held: starts a thread when the jobs that may run now
    /// outnumber the idle threads and the cap allows. False when none was
    /// needed or none could start.
    private func startThreadIfNeeded() -> Bool {
        guard jobs.runnableCount > idle && threads - parked < maxThreads else { return false }
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
                var job: (@Sendable () -> Void)?
                var share: ObjectIdentifier?
                if let taken = jobs.take() { (share, job) = (taken.share, taken.job) }
                if job != nil {
                    // The job runs, and this thread lets go of it, with no
                    // lock held: what it captured (a handle's last
                    // reference, closing its database) must not go under
                    // the pool's lock.
                    condition.unlocked {
                        job?()
                        job = nil
                    }
                    jobs.finished(share)
                    if jobs.runnableCount > 0 { condition.broadcast() }
                    continue
                }
                // Jobs still waiting are of shares at their limit: the
                // threads running those take them as they finish.
                if stopping {
                    threads -= 1
                    return  // `stop` joins it
                }
                idle += 1
                let deadline = idleMilliseconds.map { Deadline.fromNow(milliseconds: $0) }
                condition.wait(until: { jobs.runnableCount > 0 || stopping }, deadline: deadline)
                idle -= 1
                if deadline != nil && jobs.runnableCount == 0 && !stopping {
                    threads -= 1
                    // Idle: it ends on its own (detached).
                    if let me = spawned.firstIndex(where: \.isCurrent) { spawned.remove(at: me).join() }
                    return
                }
            }
        }
    }
}

extension LockClass {
    /// `WorkerPool.condition`: a worker pool's jobs and counts (starts a thread inside).
    static let workerPool = LockClass(rank: 65, "WorkerPool.condition")
}
