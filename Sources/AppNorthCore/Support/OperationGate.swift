import Glibc
import Synchronization

/// Serialises the operations of one queue or cache, including the host
/// storage callbacks they make. A callback that calls back into the same
/// object on the same thread gets `.wrongState` instead of a deadlock.
/// Data locks are never held while host code runs; this gate is the
/// operation's turn, not a data lock: a `Lock` of the outermost level that
/// fork() does not wait for (its holder may be in host code for as long as
/// the host likes) and a child makes anew (`.reinitialize`).
final class OperationGate: Sendable {
    private let turn = Lock<Void>((), level: LockClass.gate, atFork: .reinitialize)
    private let owner = Atomic<UInt>(0)

    func run<T>(_ what: String, _ body: () throws -> T) throws -> T {
        let me = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == me {
            throw AppNorthError.wrongState("\(what) was called from inside one of its own storage callbacks")
        }
        return try turn.locked { () throws -> T in
            owner.store(me, ordering: .releasing)
            defer { owner.store(0, ordering: .releasing) }
            return try body()
        }
    }
}
