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
///
/// The flag is a `ForkLocal`, like every per-process object: a child's
/// first client runs `firstUses` again, which costs little (the runtime's
/// first uses it inherited are made) and makes the child's own tables
/// under the lock, so that a fork of the child waits for them too.
package enum RuntimeWarmUp {
    private final class Done: Sendable {
        let made = Lock(false, level: LockClass.runtimeWarmUp)
    }

    private static let current = ForkLocal<Done, Never> { Done() }

    /// Runs `firstUses` once per process, holding the lock (a client's
    /// creation: not a hot path).
    package static func once(_ firstUses: () -> Void) {
        current.value.made.withLock { made in
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

extension LockClass {
    /// `RuntimeWarmUp.made`: a process's first client makes the start path's runtime first
    /// uses inside it (ForkLocal slots and tables inside it; fork() waits for them).
    static let runtimeWarmUp = LockClass(rank: 50, "RuntimeWarmUp.made")
}
