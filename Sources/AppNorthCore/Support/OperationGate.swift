import Glibc
import Synchronization

/// Serialises the operations of one queue or cache, including the host
/// storage callbacks they make. A callback that calls back into the same
/// object on the same thread gets `.wrongState` instead of a deadlock.
/// Data locks (Lock) are never held while host code runs; this gate is
/// the operation's turn, not a data lock.
final class OperationGate: @unchecked Sendable {
    // @unchecked: the pthread mutex lives at a stable heap address and is
    // only touched through pthread calls.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let owner = Atomic<UInt>(0)

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func run<T>(_ what: String, _ body: () throws -> T) throws -> T {
        let me = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == me {
            throw AppNorthError.wrongState("\(what) was called from inside one of its own storage callbacks")
        }
        pthread_mutex_lock(mutex)
        owner.store(me, ordering: .releasing)
        defer {
            owner.store(0, ordering: .releasing)
            pthread_mutex_unlock(mutex)
        }
        return try body()
    }
}
