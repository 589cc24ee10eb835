/// The live handles whose threads appnorth_shutdown() stops (an events
/// queue's uploader, a config's stream, a client's transfers): each
/// registers the stop its _free would do when made, and unregisters it when
/// freed. A fork() child starts with an empty table (ForkLocal).
///
/// Why not LibraryThreads.stopAll alone: a thread's generic stop only asks
/// its loop to end, while a config stream blocked in a read or an upload in
/// flight ends at once only through its owner's close (which cancels the
/// transfer). The process-wide transfer thread and operation workers are
/// ended after these by LibraryThreads.stopAll.
package enum ThreadOwners {
    private final class Table: Sendable {
        let entries = Lock<[ObjectIdentifier: @Sendable () -> Void]>([:], level: LockLevel.threadOwners)
    }

    private static let table = ForkLocal<Table, Never> { Table() }

    /// Registers `owner`'s `stop` (called at most once, outside any library
    /// lock; capture `owner` weakly in it). Unregister before `owner` goes.
    package static func register(_ owner: AnyObject, stop: @escaping @Sendable () -> Void) {
        table.value.entries.withLock { $0[ObjectIdentifier(owner)] = stop }
    }

    package static func unregister(_ owner: AnyObject) {
        _ = table.value.entries.withLock { $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    /// Runs every registered stop (outside the lock) and forgets them all.
    /// Returns how many ran.
    @discardableResult
    package static func stopAll() -> Int {
        let stops = table.value.entries.withLock { entries -> [@Sendable () -> Void] in
            let all = Array(entries.values)
            entries.removeAll()
            return all
        }
        for stop in stops { stop() }
        return stops.count
    }
}
