import CCurl
import CSystem
import Glibc

/// Wakes, from any thread, a thread that waits on transfers so that it
/// looks at their cancellation at once: a curl multi handle's own wake-up
/// (curl_multi_wakeup, for a transfer in `TransferSlot.run`) or the
/// transfer engine's wake descriptor (`TransferEngine`, which waits in poll()).
struct TransferWaker: @unchecked Sendable {
    // @unchecked: curl_multi_wakeup and WakeDescriptor.signal are callable from any thread.
    private let multi: UnsafeMutableRawPointer?
    private let engineWake: WakeDescriptor?

    init(multi: UnsafeMutableRawPointer) {
        self.multi = multi
        engineWake = nil
    }

    init(wake: WakeDescriptor) {
        multi = nil
        engineWake = wake
    }

    func wake() {
        if let multi {
            curl_multi_wakeup(multi)
        } else {
            engineWake?.signal()
        }
    }
}
