import Foundation

/// Threads this library owns, for the core's blocking calls (network, disk,
/// waits on host storage), so that an async caller never blocks a thread of
/// Swift's cooperative pool. Threads start on demand up to `maxThreads` and
/// end after `idleSeconds` without work; work beyond that many waits its
/// turn, in order. A thread parked in `whileWaiting` (waiting for a host's
/// async storage) does not count: that storage may itself call the library
/// (an actor over `AppNorthSQLiteStorage`), and must find a thread.
final class BlockingWorkers: @unchecked Sendable {
    // @unchecked: every field is touched only with `condition` locked.
    static let shared = BlockingWorkers(maxThreads: 32, idleSeconds: 10)

    private let maxThreads: Int
    private let idleSeconds: TimeInterval
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0  // index of the oldest job in `jobs`
    private var threads = 0
    private var idle = 0
    private var parked = 0

    init(maxThreads: Int, idleSeconds: TimeInterval) {
        self.maxThreads = max(1, maxThreads)
        self.idleSeconds = idleSeconds
    }

    /// Runs `job` on a worker thread, soon.
    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        defer { condition.unlock() }
        jobs.append(job)
        startThreadIfNeeded()
        condition.signal()
    }

    /// Runs `wait` (a wait for async host code) with this worker parked:
    /// not counted against `maxThreads` meanwhile.
    func whileWaiting<T>(_ wait: () throws -> T) rethrows -> T {
        condition.lock()
        parked += 1
        startThreadIfNeeded()
        condition.unlock()
        defer {
            condition.lock()
            parked -= 1
            condition.unlock()
        }
        return try wait()
    }

    /// Threads started and not yet ended, parked ones included (for tests).
    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    /// With the lock held: starts a thread when the waiting jobs outnumber
    /// the idle threads, so that one job's long network call never holds up
    /// another's.
    private func startThreadIfNeeded() {
        guard jobs.count - next > idle && threads - parked < maxThreads else { return }
        threads += 1
        let thread = Thread { [self] in work() }
        thread.name = "appnorth-worker"
        thread.start()
    }

    private func work() {
        condition.lock()
        while true {
            if next < jobs.count {
                let job = jobs[next]
                next += 1
                if next == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    next = 0
                }
                condition.unlock()
                job()
                condition.lock()
                continue
            }
            idle += 1
            let woken = condition.wait(until: Date(timeIntervalSinceNow: idleSeconds))
            idle -= 1
            if !woken && next >= jobs.count {
                threads -= 1
                condition.unlock()
                return
            }
        }
    }
}
