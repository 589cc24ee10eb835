import CCurl
import CSystem
import Glibc

/// Wakes, from any thread, a thread that waits on transfers so that it
/// looks at their cancellation at once: a curl multi handle's own wake-up
/// (curl_multi_wakeup, for a transfer in `TransferSlot.run`) or the
/// transfer engine's eventfd (`TransferEngine`, which waits in poll()).
struct TransferWaker: @unchecked Sendable {
    // @unchecked: curl_multi_wakeup and eventfd_write are callable from any thread.
    private let multi: UnsafeMutableRawPointer?
    private let eventFD: Int32

    init(multi: UnsafeMutableRawPointer) {
        self.multi = multi
        eventFD = -1
    }

    init(eventFD: Int32) {
        multi = nil
        self.eventFD = eventFD
    }

    func wake() {
        if let multi {
            curl_multi_wakeup(multi)
        } else {
            _ = eventfd_write(eventFD, 1)
        }
    }
}
