import AppNorthCore
import Foundation
import Synchronization

/// A core queue or cache opened on first use, on a library thread: opening
/// loads the storage, which may be a host's async storage or disk, and
/// `AppNorthReadCache(storage:)` is built without `try`. A failed open
/// (storage error, damaged blob, bad argument) is thrown to that use and
/// tried again on the next.
final class LazyCore<Core: AnyObject & Sendable>: Sendable {
    private let open: @Sendable () throws -> Core
    private let opened = Mutex<Core?>(nil)
    /// One open at a time; held while the storage loads.
    private let opening = NSLock()

    init(_ open: @escaping @Sendable () throws -> Core) {
        self.open = open
    }

    /// The opened core, if it is open already.
    var current: Core? { opened.withLock { $0 } }

    /// Opens it if needed. Blocks: call on a library thread.
    func get() throws -> Core {
        if let core = current { return core }
        opening.lock()
        defer { opening.unlock() }
        if let core = current { return core }
        let core = try open()
        opened.withLock { $0 = core }
        return core
    }
}
