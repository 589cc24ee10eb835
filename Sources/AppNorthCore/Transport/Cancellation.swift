import CCurl
import Synchronization

/// Lets another thread end a streaming transfer. Cancelling wakes a
/// transfer in progress at once; one started after `cancel()` ends at once.
/// A cancellation may serve several transfers in turn (one at a time).
public final class StreamCancellation: Sendable {
    private let flag = Atomic<Bool>(false)
    /// The multi handle of the transfer in progress, woken by cancel().
    private let running = Lock<MultiHandle?>(nil)
    public init() {}

    public func cancel() {
        flag.store(true, ordering: .releasing)
        running.withLock { if let multi = $0 { curl_multi_wakeup(multi.raw) } }
    }

    public var isCancelled: Bool { flag.load(ordering: .acquiring) }

    func attach(_ multi: UnsafeMutableRawPointer) {
        running.withLock { $0 = MultiHandle(raw: multi) }
    }

    func detach() {
        running.withLock { $0 = nil }
    }
}

/// The transfers of one transport in progress, for `cancelInFlight()`: a
/// generation that each transfer compares with the one it started under,
/// and their multi handles, woken so that a transfer waiting in
/// curl_multi_poll notices at once.
final class InFlightTransfers: Sendable {
    private let counter = Atomic<UInt64>(0)
    private let running = Lock<[ObjectIdentifier: MultiHandle]>([:])

    var generation: UInt64 { counter.load(ordering: .acquiring) }

    func cancelAll() {
        // Under the lock: a transfer unregisters (under it too) before its
        // multi handle can be reused or cleaned up.
        running.withLock { handles in
            counter.add(1, ordering: .acquiringAndReleasing)
            for handle in handles.values { curl_multi_wakeup(handle.raw) }
        }
    }

    func register(_ slot: TransferSlot) {
        register(ObjectIdentifier(slot), multi: slot.multi)
    }

    func unregister(_ slot: TransferSlot) {
        unregister(ObjectIdentifier(slot))
    }

    /// A transfer on a shared multi handle (TransferEngine's), by its own key.
    func register(_ key: ObjectIdentifier, multi: UnsafeMutableRawPointer) {
        running.withLock { $0[key] = MultiHandle(raw: multi) }
    }

    func unregister(_ key: ObjectIdentifier) {
        _ = running.withLock { $0.removeValue(forKey: key) }
    }
}
