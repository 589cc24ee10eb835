/// The process's shared library threads, the transfer thread
/// (`TransferEngine`) and the operation workers (`OperationWorkers`), run
/// while a transport that started non-blocking work lives: each one holds
/// one use (`SharedThreads.Use`, taken before its first non-blocking start,
/// dropped with the transport, so with the last handle that holds its
/// client). When the last use goes, both are stopped and joined, and the
/// next use starts new ones: once every handle is freed no library thread
/// is left (docs/threading.md), and a host runtime that attached the
/// transfer thread (Mono) can exit.
///
/// Every `TransferEngine.shared()` and worker submit comes after a use is
/// taken, so a use taken after the last one went finds the old threads
/// already out of their `ForkLocal` and starts new ones.
enum SharedThreads {
    /// One user's hold on the shared threads; dropping it releases it.
    final class Use: Sendable {
        fileprivate init() {}
        deinit { SharedThreads.release() }
    }

    private final class Users: Sendable {
        let count = Lock<Int>(0, level: LockLevel.sharedThreadUsers)
    }

    private static let users = ForkLocal<Users, Never>(level: LockLevel.sharedThreadUsersSlot) { Users() }

    /// A new hold on the shared threads.
    static func use() -> Use {
        users.value.count.withLock { $0 += 1 }
        return Use()
    }

    /// Uses now (for tests).
    static var useCount: Int { users.value.count.withLock { $0 } }

    private static func release() {
        // Out of their ForkLocal under the count's lock: a use that comes
        // next makes new ones; these end outside it.
        let retired = users.value.count.withLock { count -> (TransferEngine?, WorkerPool?) in
            count -= 1
            guard count == 0 else { return (nil, nil) }
            return (TransferEngine.retire(), OperationWorkers.retire())
        }
        retired.0?.stop()
        retired.1?.stop()
    }
}
