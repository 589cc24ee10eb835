/// The process's shared library threads, the transfer thread
/// (`TransferEngine`) and the operation workers (`OperationWorkers`), run
/// while a handle that started non-blocking work lives: every operation's
/// owners (the client, and the queue, config or events handle) are held
/// here from its start (`hold`) to their free (`drop`, once their
/// operations have all completed). When the last owner is dropped, both are
/// stopped and joined on the freeing thread, and the next hold starts new
/// ones: once every handle is freed no library thread is left
/// (docs/threading.md), and a host runtime that attached the transfer
/// thread (Mono) can exit.
///
/// Every start of non-blocking work through the C API holds its owners
/// before it reaches `TransferEngine.shared()` or a worker, so a hold that
/// comes after the last drop finds the old threads already out of their
/// `ForkLocal` and starts new ones. Work started without a holder (the
/// core's own tests) keeps the threads it started until the process ends.
package enum SharedThreads {
    private final class Holders: Sendable {
        let owners = Lock<Set<ObjectIdentifier>>([], level: LockClass.sharedThreadUsers)
    }

    private static let holders = ForkLocal<Holders, Never>(level: LockClass.sharedThreadUsersSlot) { Holders() }

    /// Holds the shared threads for `owners` (each once, however many
    /// operations it starts), before their work starts.
    package static func hold(for owners: [AnyObject]) {
        holders.value.owners.withLock { set in
            for owner in owners { set.insert(ObjectIdentifier(owner)) }
        }
    }

    /// Owners holding the threads now (for tests).
    package static var holderCount: Int { holders.value.owners.withLock { $0.count } }

    /// `owner` is freed and its operations have completed: it no longer
    /// holds the threads. The last one stops and joins them, here.
    package static func drop(for owner: AnyObject) {
        // Out of their ForkLocal under the set's lock: a hold that comes
        // next makes new ones; these end outside it.
        let retired = holders.value.owners.withLock { set -> (TransferEngine?, WorkerPool?) in
            guard set.remove(ObjectIdentifier(owner)) != nil, set.isEmpty else { return (nil, nil) }
            return (TransferEngine.retire(), OperationWorkers.retire())
        }
        retired.0?.stop()
        retired.1?.stop()
    }
}

extension LockClass {
    /// `SharedThreads.holders`: the `ForkLocal` slot of the shared threads' holders.
    static let sharedThreadUsersSlot = LockClass(rank: 55, "SharedThreads.holders")
    /// `SharedThreads.owners`: the handles holding the transfer thread and the workers (the
    /// engine's and workers' slots are taken inside it).
    static let sharedThreadUsers = LockClass(rank: 60, "SharedThreads.owners")
}
