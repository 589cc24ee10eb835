/// The few library threads that run the non-blocking calls made of
/// several steps (a queue submit or flush, a config refresh, an events
/// flush's wait): a `WorkerPool` of at most `maxThreads` in the process,
/// started on demand, ended with the last `SharedThreads` holder. Each job runs
/// its blocking counterpart inside its operation's `OperationScope`, so
/// that cancelling the operation ends its transfers and waits, and no
/// other's. Jobs beyond `maxThreads` wait their turn, in order.
enum OperationWorkers {
    static let maxThreads = 2

    private static let current = ForkLocal<WorkerPool, Never> {
        WorkerPool(maxThreads: maxThreads, idleMilliseconds: nil, threadName: "appnorth-ops")
    }

    /// The process's pool (a new one in a fork() child, and after the last
    /// `SharedThreads` holder was freed).
    static var shared: WorkerPool { current.value }

    /// Takes the pool out (the last `SharedThreads` holder was freed); the caller
    /// stops it.
    static func retire() -> WorkerPool? { current.take(if: { _ in true }) }

    /// Runs `job` on a worker, soon. Throws when no worker can be started.
    static func submit(_ job: @escaping @Sendable () -> Void) throws(AppNorthError) {
        if !shared.submit(job) { throw .internal("cannot start a worker thread") }
    }
}

extension AsyncOperation {
    /// Runs `work` on a worker inside this operation's scope, then hands
    /// its outcome to `completion` (on that worker).
    package func runOnWorker<T: Sendable>(_ work: @escaping @Sendable () throws -> T,
                                         completion: @escaping @Sendable (Result<T, any Error>) -> Void) throws(AppNorthError) {
        try OperationWorkers.submit { [self] in
            if isCancelled {
                completion(.failure(AppNorthError.cancelled("operation cancelled before it started")))
                return
            }
            let result = OperationScope.with(cancellation) { Result { try work() } }
            completion(result)
        }
    }
}
