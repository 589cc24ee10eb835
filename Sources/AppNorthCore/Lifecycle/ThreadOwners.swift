/// The live handles whose threads appnorth_shutdown() stops (an events
/// queue's uploader, a config's stream, a client's transfers): each
/// registers, when made, how to ask its work to end, and unregisters it
/// when freed. A fork() child starts with an empty table (ForkLocal).
///
/// A request only asks (it cancels the owner's transfers and operations,
/// closes what takes new work) and never waits: appnorth_shutdown waits
/// once, for every callback and thread together, within its timeout_ms
/// (LibraryGate.waitIdle, LibraryThreads.stopAll). Why not
/// LibraryThreads.stopAll alone: a thread's generic stop only asks its loop
/// to end, while a config stream blocked in a read or an upload in flight
/// ends at once only through its owner's cancel.
package enum ThreadOwners {
    private final class Table: Sendable {
        let entries = Lock<[ObjectIdentifier: @Sendable () -> Void]>([:], level: LockClass.threadOwners)
    }

    private static let table = ForkLocal<Table, Never> { Table() }

    /// Registers how to ask `owner`'s work to end (called at most once,
    /// outside any library lock; it must not wait for a thread, a callback
    /// or an operation; capture `owner` weakly in it). Unregister before
    /// `owner` goes.
    package static func register(_ owner: AnyObject, requestStop: @escaping @Sendable () -> Void) {
        table.value.entries.withLock { $0[ObjectIdentifier(owner)] = requestStop }
    }

    package static func unregister(_ owner: AnyObject) {
        _ = table.value.entries.withLock { $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    /// Runs every registered request (outside the lock) and forgets them
    /// all. Returns how many ran.
    @discardableResult
    package static func requestStopAll() -> Int {
        let stops = table.value.entries.withLock { entries -> [@Sendable () -> Void] in
            let all = Array(entries.values)
            entries.removeAll()
            return all
        }
        for stop in stops { stop() }
        return stops.count
    }
}

extension LockClass {
    /// `ThreadOwners.entries`: the handles `appnorth_shutdown` stops.
    static let threadOwners = LockClass.leaf("ThreadOwners.entries")
}
