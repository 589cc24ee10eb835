import Synchronization

/// The Swift runtime's first uses, made where fork() waits for them.
///
/// A generic type's metadata and a lazy global's initialiser are made the
/// first time code needs them, under the runtime's own locks (its metadata
/// caches, `swift_once`), which no fork handler of ours can hold. A fork
/// while a parent thread is inside one leaves the child waiting for ever
/// when it first needs the same thing: 3 of 60 runs of test_fork_async's
/// os.fork test hung a child so, in `swift_getTupleTypeMetadata` (the
/// request headers' array), `swift_once` (`SharedThreads`' holders) and
/// `swift_checkMetadataState`, each under the child's first non-blocking
/// start, while the parent made its own first ones.
///
/// So a process's first client makes the non-blocking start path's first
/// uses under a lock the fork handlers hold (`.quiesce`): a fork waits for
/// them. This narrows the window; it cannot close it: a first use
/// elsewhere (another operation's types, a parse of a new shape) can still
/// meet a fork. docs/architecture.md, "fork()", says so.
package enum RuntimeWarmUp {
    private static let done = Lock(false, level: LockLevel.runtimeWarmUp)
    /// Set once `done` is: later clients skip the lock.
    private static let made = Atomic(false)

    /// Runs `firstUses` once per process (a forked child inherits what its
    /// parent made), holding the lock.
    package static func once(_ firstUses: () -> Void) {
        guard !self.made.load(ordering: .acquiring) else { return }
        done.withLock { made in
            defer { self.made.store(true, ordering: .releasing) }
            guard !made else { return }
            firstUses()
            made = true
        }
    }

    /// The start path's process-wide tables, made before the first start.
    package static func startPathTables() {
        _ = OperationTable.shared
        _ = SharedThreads.holderCount
    }
}
