import CSystem
import Glibc

/// A descriptor one thread makes readable and another waits on, in poll()
/// or in the host's own loop: the dispatch descriptor
/// (`CallbackDispatcher.descriptor`) and the transfer engine's wake-up
/// (`TransferEngineCore`, `TransferWaker`).
///
/// Linux: an eventfd, non-blocking and close-on-exec. This is the one place
/// that says so: a port replaces this file (a pipe pair on macOS and the
/// BSDs, an event handle on Windows; docs/platforms.md).
package struct WakeDescriptor: Sendable {
    /// What to wait on: readable from `signal()` until `drain()`.
    package let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    package static func make() throws(AppNorthError) -> WakeDescriptor {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else { throw .internal("eventfd failed: \(String(cString: strerror(errno)))") }
        return WakeDescriptor(fd: fd)
    }

    /// Makes it readable. Any thread; never blocks.
    package func signal() { _ = eventfd_write(fd, 1) }

    /// Makes it unreadable again, however often it was signalled.
    package func drain() {
        var value: eventfd_t = 0
        _ = eventfd_read(fd, &value)
    }

    /// Closes it. Once, when nothing waits on it any more.
    package func close() { _ = Glibc.close(fd) }
}
