/// The live handles that run threads of their own (an events queue's
/// uploader, a config's stream), so that appnorth_shutdown() can stop them
/// all: each registers a stop action when made and unregisters it when
/// freed. Entries made before fork() are not the child's: they are skipped.
///
/// The smallest thing for the exit hook (#33); the process-wide transfer
/// thread and operation workers are not here (they run no host code once
/// the callback gate is closed, and park).
public enum ThreadOwners {
    private struct Entry: Sendable {
        let generation: UInt64
        let stop: @Sendable () -> Void
    }

    private static let table = Lock<[ObjectIdentifier: Entry]>([:])

    /// Registers `owner`'s `stop` (called at most once, outside any library
    /// lock; capture `owner` weakly in it). Unregister before `owner` goes.
    public static func register(_ owner: AnyObject, stop: @escaping @Sendable () -> Void) {
        let entry = Entry(generation: ForkGuard.generation, stop: stop)
        table.withLock { $0[ObjectIdentifier(owner)] = entry }
    }

    public static func unregister(_ owner: AnyObject) {
        _ = table.withLock { $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    /// Runs every registered stop of this process (not those inherited
    /// through fork()) and forgets them all. Returns how many ran.
    @discardableResult
    public static func stopAll() -> Int {
        let generation = ForkGuard.generation
        let entries = table.withLock { table -> [Entry] in
            let all = Array(table.values)
            table.removeAll()
            return all
        }
        let mine = entries.filter { $0.generation == generation }
        for entry in mine { entry.stop() }
        return mine.count
    }
}
