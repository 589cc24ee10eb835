import Glibc

/// A moment on a monotonic clock (`AppNorthClock.monotonicNanoseconds`):
/// "`milliseconds` from now" for timeouts, retry waits and idle limits.
///
/// Built from outside values (host timeouts, server Retry-After, options),
/// so it never traps: a negative wait is "now", a huge one saturates at
/// `.never`, and the time left is 0 once it has passed. The clock is the
/// caller's (a `ManualClock` in tests); `Deadline` only does the arithmetic.
package struct Deadline: Sendable, Hashable, Comparable {
    /// The monotonic nanoseconds it falls at; `UInt64.max` is never.
    package let nanoseconds: UInt64

    package static let never = Deadline(nanoseconds: .max)

    package init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// `milliseconds` after the monotonic time `now` (ns).
    package init(milliseconds: Int, after now: UInt64) {
        self.init(nanoseconds: now.addingSaturating(Self.nanoseconds(milliseconds: milliseconds)))
    }

    /// `milliseconds` from now on `clock`.
    package static func fromNow(milliseconds: Int, on clock: some AppNorthClock = SystemClock()) -> Deadline {
        Deadline(milliseconds: milliseconds, after: clock.monotonicNanoseconds())
    }

    /// A count of milliseconds as nanoseconds: 0 for a negative count,
    /// `UInt64.max` past what fits.
    package static func nanoseconds(milliseconds: Int) -> UInt64 {
        UInt64(clamping: milliseconds).multipliedSaturating(by: 1_000_000)
    }

    package func hasPassed(at now: UInt64) -> Bool { now >= nanoseconds }

    /// Nanoseconds left at `now`; 0 once passed.
    package func remainingNanoseconds(at now: UInt64) -> UInt64 {
        now >= nanoseconds ? 0 : nanoseconds - now
    }

    /// Whole milliseconds left at `now`, rounded down; 0 once passed.
    package func remainingMilliseconds(at now: UInt64) -> Int {
        Int(clamping: remainingNanoseconds(at: now) / 1_000_000)
    }

    /// How long to sleep at `now` so as to wake past the deadline: the
    /// whole milliseconds left plus one (1 once passed; saturating).
    package func sleepMilliseconds(at now: UInt64) -> Int {
        remainingMilliseconds(at: now).addingSaturating(1)
    }

    /// Milliseconds left at `now`, rounded up; 0 once passed.
    package func remainingMillisecondsRoundedUp(at now: UInt64) -> Int {
        let left = remainingNanoseconds(at: now)
        return Int(clamping: left / 1_000_000 + (left % 1_000_000 == 0 ? 0 : 1))
    }

    /// As a CLOCK_MONOTONIC `timespec` (pthread_cond_timedwait on a
    /// condition set to that clock): only meaningful for a deadline made
    /// on `SystemClock`.
    package var monotonicTimespec: timespec {
        timespec(tv_sec: Int(clamping: nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }

    package static func < (a: Deadline, b: Deadline) -> Bool { a.nanoseconds < b.nanoseconds }
}
