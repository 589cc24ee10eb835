import CCurl
import Synchronization

/// The core's one cancellation token: lets another thread end a piece of
/// work. It is what a non-blocking call's operation holds
/// (`AsyncOperation.cancellation`), what `OperationScope` makes current for
/// a thread, what an event upload attempt and a config stream or fetch
/// are ended by, and what a Swift task's cancel handler sets.
///
/// Cancelling wakes the transfer in progress at once (its curl multi
/// handle, or the transfer engine's poll); a transfer started after
/// `cancel()` ends at once. Any number of transfers and waits may watch one
/// token at once (each by its own key): an operation waiting for a worker
/// on the engine and its transfer on that worker share it. Cancelling is final.
/// Work asks whether it was cancelled through one value, `Cancellation`:
/// its operation's token and its client's `cancelInFlight()` (a
/// generation, `InFlightTransfers`).
package final class CancellationToken: Sendable {
    private let flag = Atomic<Bool>(false)
    /// What the transfers and waits in progress wait in, by their keys; woken by cancel().
    private let running = Lock<[ObjectIdentifier: TransferWaker]>([:], level: LockClass.cancellation)
    package init() {}

    package func cancel() {
        flag.store(true, ordering: .releasing)
        running.withLock { for waker in $0.values { waker.wake() } }
    }

    package var isCancelled: Bool { flag.load(ordering: .acquiring) }

    /// From now until `detach(key)`, `cancel()` wakes `waker`.
    func attach(_ waker: TransferWaker, key: ObjectIdentifier) {
        running.withLock { $0[key] = waker }
    }

    func detach(_ key: ObjectIdentifier) {
        _ = running.withLock { $0.removeValue(forKey: key) }
    }
}

/// The transfers of one transport in progress, for `cancelInFlight()`: a
/// generation that each transfer compares with the one it started under,
/// and their wakers, woken so that a transfer waiting in curl_multi_poll
/// (or the engine's poll()) notices at once.
final class InFlightTransfers: Sendable {
    private let counter = Atomic<UInt64>(0)
    private let running = Lock<[ObjectIdentifier: TransferWaker]>([:], level: LockClass.inFlightTransfers)

    var generation: UInt64 { counter.load(ordering: .acquiring) }

    func cancelAll() {
        // Under the lock: a transfer unregisters (under it too) before its
        // multi handle can be reused or cleaned up.
        running.withLock { handles in
            counter.add(1, ordering: .acquiringAndReleasing)
            for waker in handles.values { waker.wake() }
        }
    }

    /// A transfer (its slot, or its job in the shared engine) or an engine
    /// wait, by its own key (through `Cancellation.attach`).
    func register(_ key: ObjectIdentifier, waker: TransferWaker) {
        running.withLock { $0[key] = waker }
    }

    func unregister(_ key: ObjectIdentifier) {
        _ = running.withLock { $0.removeValue(forKey: key) }
    }
}

extension LockClass {
    /// `CancellationToken.running`: the transfer a token wakes.
    static let cancellation = LockClass.leaf("CancellationToken.running")
    /// `InFlightTransfers.running`: the transfers a handle's free wakes.
    static let inFlightTransfers = LockClass.leaf("InFlightTransfers.running")
}
