import AppNorthCore
import Foundation

/// Threads this library owns, for the core's blocking calls (network, disk,
/// waits on host storage), so that an async caller never blocks a thread of
/// Swift's cooperative pool: the core's `WorkerPool`, up to 32 threads that
/// end after 10 s without work. A thread parked in `whileWaiting` (waiting
/// for a host's async storage) does not count: that storage may itself call
/// the library (an actor over `AppNorthSQLiteStorage`), and must find a thread.
typealias BlockingWorkers = WorkerPool

extension WorkerPool {
    /// The process's pool (a fork() child's is its own: its parent's
    /// threads do not exist there).
    static var shared: WorkerPool { blockingWorkers.value }

    convenience init(maxThreads: Int, idleSeconds: TimeInterval) {
        let ms = (idleSeconds * 1000).rounded()
        self.init(maxThreads: maxThreads, idleMilliseconds: ms.isFinite ? Int(clamping: Int64(max(0, min(ms, 1e15)))) : nil,
                  threadName: "appnorth-worker")
    }
}

private let blockingWorkers = ForkLocal<WorkerPool, Never> { WorkerPool(maxThreads: 32, idleSeconds: 10) }
