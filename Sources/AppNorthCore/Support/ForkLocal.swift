/// A process-wide object that a fork() child makes anew: the one way the
/// core keeps per-process state (the operation table, the transfer
/// engine, the workers, the storage claims, the random pool...;
/// docs/architecture.md lists them).
///
/// The parent's value is left alone in the child (its threads do not exist
/// there, its locks are usable but its state describes the parent); the
/// first use in the child makes a new one with `make`, under this object's
/// own lock (so `make` must not call host code or take a lock of a lower
/// level).
package final class ForkLocal<T: Sendable, E: Error>: Sendable {
    private let slot: Lock<(generation: UInt64, value: T?)>
    private let make: @Sendable () throws(E) -> T

    package init(level: LockClass = LockClass.forkLocal, _ make: @escaping @Sendable () throws(E) -> T) {
        slot = Lock((0, nil), level: level)
        self.make = make
    }

    /// This process's value, made on first use (in each process).
    package func get() throws(E) -> T {
        let generation = ForkGuard.generation
        return try slot.withLock { (slot) throws(E) -> T in
            if slot.generation == generation, let value = slot.value { return value }
            let made = try make()
            slot = (generation, made)
            return made
        }
    }

    /// This process's value if it was made here, else nil (never makes one).
    package var ifMade: T? {
        let generation = ForkGuard.generation
        return slot.withLock { $0.generation == generation ? $0.value : nil }
    }

    /// Drops this process's value (the next `get` makes another) and
    /// returns it; for an object that ends with its last user.
    func take(if matches: (T) -> Bool) -> T? {
        let generation = ForkGuard.generation
        return slot.withLock { slot in
            guard slot.generation == generation, let value = slot.value, matches(value) else { return nil }
            slot.value = nil
            return value
        }
    }
}

extension ForkLocal where E == Never {
    /// This process's value, made on first use (in each process).
    package var value: T { self.get() }
}

extension LockClass {
    /// `ForkLocal.slot`: a `ForkLocal`'s slot, by default (its `make` may start a thread).
    package static let forkLocal = LockClass(rank: 75, "ForkLocal.slot")
}
