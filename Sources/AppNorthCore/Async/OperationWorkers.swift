/// The library threads that run the non-blocking calls made of several
/// steps (a queue submit or flush, a config refresh): a `WorkerPool` of at
/// most `maxThreads` in the process, at most `perClient` of them for one
/// client's jobs at a time, started on demand, ended with the last
/// `SharedThreads` holder. Each job runs its blocking counterpart inside
/// its operation's `OperationScope`, so that cancelling the operation ends
/// its transfers and waits, and no other's.
///
/// A worker is never the only way forward (`runOnWorker`): while a job
/// waits for one, the transfer engine's thread watches its operation's
/// cancel, its client's cancel and its deadline, and completes it at once
/// if one comes first; the deadline counts from the operation's start, and
/// a worker that takes it late gives its request only what is left. So a
/// client whose server never answers holds at most `perClient` workers,
/// other clients' jobs run beside it, and a cancel, a timeout or a free
/// ends any operation within milliseconds.
enum OperationWorkers {
    static let maxThreads = 8
    static let perClient = 2

    private static let current = ForkLocal<WorkerPool, Never> {
        WorkerPool(maxThreads: maxThreads, perShare: perClient, idleMilliseconds: nil, threadName: "appnorth-ops")
    }

    /// The process's pool (a new one in a fork() child, and after the last
    /// `SharedThreads` holder was freed).
    static var shared: WorkerPool { current.value }

    /// Takes the pool out (the last `SharedThreads` holder was freed); the caller
    /// stops it.
    static func retire() -> WorkerPool? { current.take(if: { _ in true }) }

    /// Runs `job` on a worker, soon, within `client`'s share. Throws when
    /// no worker can be started.
    static func submit(for client: AnyObject, _ job: @escaping @Sendable () -> Void) throws(AppNorthError) {
        if !shared.submit(share: ObjectIdentifier(client), job) { throw .internal("cannot start a worker thread") }
    }
}

extension AsyncOperation {
    /// Runs `work` on a worker inside this operation's scope, then hands
    /// its outcome to `completion` (on that worker). Its timeout,
    /// `timeoutMilliseconds` (the client's request timeout; 0: none),
    /// counts from now, its start: until a worker takes it, the transfer
    /// engine's thread watches it, and a cancel of this operation or of
    /// its client (`transport.cancelInFlight()`) ends it with `.cancelled`,
    /// the deadline with `.timeout`, on that thread, without running `work`
    /// (nothing was sent then); once a worker took it, its first request
    /// must end by that same deadline (`OperationScope`). `share` is whose
    /// share of the workers it takes (its client).
    package func runOnWorker<T: Sendable>(share: AnyObject, transport: HTTPTransport, timeoutMilliseconds: Int,
                                         _ work: @escaping @Sendable () throws -> T,
                                         completion: @escaping @Sendable (Result<T, any Error>) -> Void) throws(AppNorthError) {
        let turn = WorkTurnCell()
        let limit = timeoutMilliseconds > 0 ? timeoutMilliseconds : Int(Int32.max)
        let deadline = Deadline(milliseconds: limit, after: monotonicNow())
        let waiting = Cancellation(operation: cancellation, transport: transport)
        let wait = EngineWait(deadline: deadline, cancellation: waiting) { how in
            guard how != .reached, turn.apply(.ended) else { return }  // a worker took it
            completion(.failure(Self.notStarted(how, limit)))
        }
        let engine = try TransferEngine.shared()
        try engine.watch(wait)
        do {
            try OperationWorkers.submit(for: share) { [self] in
                guard turn.apply(.workerTakes) else { return }  // ended while it waited
                engine.reach(wait)  // the engine stops watching it
                // Cancelled before the engine's thread saw it: this
                // operation, or its client (a transfer started now would
                // capture a newer generation and miss that cancel).
                if let reason = isCancelled ? .operation : waiting.reason {
                    completion(.failure(Self.notStarted(.cancelled(reason), limit)))
                    return
                }
                let firstRequestBy = timeoutMilliseconds > 0 ? deadline : nil
                let result = OperationScope.with(cancellation, firstRequestBy: firstRequestBy) { Result { try work() } }
                completion(result)
            }
        } catch {
            _ = turn.apply(.ended)  // its wait ends .reached: no completion
            engine.reach(wait)
            throw error
        }
    }

    /// How an operation that no worker took ended.
    private static func notStarted(_ how: EngineWait.End, _ limit: Int) -> AppNorthError {
        switch how {
        case .timedOut:
            .timeout("no worker was free within \(limit) ms (the client's request timeout); nothing was sent")
        case .cancelled(.client): .cancelled("cancelled by appnorth_client_cancel before it started; nothing was sent")
        case .cancelled(.stopped):
            .cancelled("cancelled: the transfer thread stopped before a worker took it (its last handle was freed, or appnorth_shutdown); nothing was sent")
        case .cancelled(.operation), .reached: .cancelled("operation cancelled before it started; nothing was sent")
        }
    }
}
