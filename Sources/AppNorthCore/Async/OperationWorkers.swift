import CSystem
import Glibc

/// The few library threads that run the non-blocking calls made of
/// several steps (a queue submit or flush, a config refresh, an events
/// flush's wait): at most `maxThreads` in the process, started on demand,
/// never ended (like the transfer thread). Each job runs its blocking
/// counterpart inside its operation's `OperationScope`, so that cancelling
/// the operation ends its transfers and waits, and no other's. Jobs beyond
/// `maxThreads` wait their turn, in order.
final class OperationWorkers: @unchecked Sendable {
    // @unchecked: every field is touched only with `condition` locked.
    static let maxThreads = 2

    private static let current = Lock<(generation: UInt64, workers: OperationWorkers?)>((0, nil))

    /// The process's pool (a new one in a fork() child).
    static var shared: OperationWorkers {
        let generation = ForkGuard.generation
        return current.withLock { state in
            if state.generation == generation, let workers = state.workers { return workers }
            let made = OperationWorkers()
            state = (generation, made)
            return made
        }
    }

    private let condition = MonotonicCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    private var threads = 0
    private var idle = 0

    /// Runs `job` on a worker, soon. Throws when no worker can be started.
    func submit(_ job: @escaping @Sendable () -> Void) throws(AppNorthError) {
        let started: Bool = condition.locked {
            jobs.append(job)
            condition.broadcast()
            guard jobs.count - next > idle && threads < Self.maxThreads else { return true }
            if startThread() { return true }
            // No thread at all to run it: take it back.
            if threads == 0 { jobs.removeLast(); return false }
            return true
        }
        if !started { throw .internal("cannot start a worker thread") }
    }

    /// With the lock held.
    private func startThread() -> Bool {
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attributes) }
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, &attributes, { raw in
            appnorth_set_thread_name("appnorth-ops")
            Unmanaged<OperationWorkers>.fromOpaque(raw!).takeRetainedValue().work()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<OperationWorkers>.fromOpaque(context).release()
            return false
        }
        threads += 1
        return true
    }

    private func work() {
        condition.locked {
            while true {
                if next < jobs.count {
                    let job = jobs[next]
                    next += 1
                    if next == jobs.count {
                        jobs.removeAll(keepingCapacity: true)
                        next = 0
                    }
                    condition.unlocked { job() }
                    continue
                }
                idle += 1
                condition.wait(until: { next < jobs.count }, deadline: nil)
                idle -= 1
            }
        }
    }
}

extension AsyncOperation {
    /// Runs `work` on a worker inside this operation's scope, then hands
    /// its outcome to `completion` (on that worker).
    public func runOnWorker<T: Sendable>(_ work: @escaping @Sendable () throws -> T,
                                         completion: @escaping @Sendable (Result<T, any Error>) -> Void) throws(AppNorthError) {
        try OperationWorkers.shared.submit { [self] in
            if isCancelled {
                completion(.failure(AppNorthError.cancelled("operation cancelled before it started")))
                return
            }
            let result = OperationScope.with(cancellation) { Result { try work() } }
            completion(result)
        }
    }
}
