import Synchronization

/// Whether an events handle is open: the one place "closed" is held.
/// Before, it was held three ways (a field of the queue's state, an
/// atomic for `track`, and a cancellation token the upload thread's
/// attempts checked).
///
/// `track` reads it under its stripe lock, state changes and the upload
/// thread's attempts under the state lock; `close` is one atomic step
/// (acquire/release), so a section that starts after it sees it. The
/// upload thread itself is stopped by its owner (`AppNorthEvents.close`).
final class EventsLifecycle: Sendable {
    private let closedFlag = Atomic<Bool>(false)

    var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    /// Closes; returns true the first time (`close` is idempotent).
    @discardableResult
    func close() -> Bool {
        closedFlag.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}
