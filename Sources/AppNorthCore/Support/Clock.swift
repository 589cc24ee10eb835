import Glibc

/// Where the core reads time. Timers, TTLs and backoff all go through a
/// clock so that tests can move time instead of sleeping.
public protocol AppNorthClock: Sendable {
    /// Monotonic nanoseconds: for ages and deadlines within a process.
    /// Wall-clock jumps do not move it.
    func monotonicNanoseconds() -> UInt64
    /// Milliseconds since the Unix epoch: for timestamps that are stored or
    /// sent, never for measuring age within a process.
    func wallMilliseconds() -> Int64
}

/// The real clock (clock_gettime).
public struct SystemClock: AppNorthClock {
    public init() {}

    public func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(clamping: ts.tv_sec).multipliedSaturating(by: 1_000_000_000).addingSaturating(UInt64(clamping: ts.tv_nsec))
    }

    public func wallMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec).multipliedSaturating(by: 1000).addingSaturating(Int64(ts.tv_nsec) / 1_000_000)
    }
}

/// A clock that only moves when told to: for tests and for hosts that
/// drive time themselves.
public final class ManualClock: AppNorthClock {
    private let state: Lock<(mono: UInt64, wall: Int64)>

    public init(monotonicNanoseconds: UInt64 = 1_000_000_000, wallMilliseconds: Int64 = 1_700_000_000_000) {
        state = Lock((monotonicNanoseconds, wallMilliseconds), level: LockClass.manualClock)
    }

    public func monotonicNanoseconds() -> UInt64 { state.withLock { $0.mono } }
    public func wallMilliseconds() -> Int64 { state.withLock { $0.wall } }

    /// Moves both clocks forward. A monotonic clock cannot go back, so a
    /// negative step does nothing; each clock stops at its largest value
    /// rather than wrapping.
    public func advance(milliseconds: Int64) {
        guard milliseconds > 0 else { return }
        state.withLock {
            $0.mono = $0.mono.addingSaturating(UInt64(milliseconds).multipliedSaturating(by: 1_000_000))
            $0.wall = $0.wall.addingSaturating(milliseconds)
        }
    }

    /// Sets the wall clock only, as a user changing the system time would.
    public func setWall(milliseconds: Int64) {
        state.withLock { $0.wall = milliseconds }
    }
}

/// The wall times a stored row may hold: the Unix epoch to the end of
/// year 9999. A stored time outside them is damage, and the row holding
/// it is dropped when read.
package enum StoredWallTime {
    package static let range: ClosedRange<Int64> = 0...253_402_300_799_999
}

/// Sleeps the calling thread.
func sleepMilliseconds(_ ms: Int) {
    guard ms > 0 else { return }
    var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    var remaining = timespec()
    while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
}

extension LockClass {
    /// `ManualClock.state`: a test clock's time.
    static let manualClock = LockClass.leaf("ManualClock.state")
}
