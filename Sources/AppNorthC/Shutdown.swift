import AppNorthCore
import CAppNorthAPI
import Glibc
import Synchronization

/// The process-wide gate every host callback passes (ThreadCalls.callback)
/// and appnorth_shutdown() closes: a count of host callbacks running, and
/// a closed bit. Once closed, no host callback starts again, every call
/// that goes through `guarded` is refused, and `_free` leaks the handle.
enum LibraryGate {
    private static let closedBit: UInt = 1 << (UInt.bitWidth - 1)
    private static let state = Atomic<UInt>(0)

    static var isClosed: Bool { state.load(ordering: .acquiring) & closedBit != 0 }

    /// Counts one host callback; false once the gate is closed.
    static func enter() -> Bool {
        var seen = state.load(ordering: .relaxed)
        while true {
            guard seen & closedBit == 0 else { return false }
            let (done, now) = state.weakCompareExchange(expected: seen, desired: seen + 1,
                                                       successOrdering: .acquiring, failureOrdering: .relaxed)
            if done { return true }
            seen = now
        }
    }

    static func leave() { state.wrappingSubtract(1, ordering: .releasing) }

    /// Closes the gate (again: harmless). Returns whether it was open.
    static func close() -> Bool { state.bitwiseOr(closedBit, ordering: .acquiringAndReleasing).oldValue & closedBit == 0 }

    /// Waits until no host callback runs, or the deadline.
    static func waitIdle(until deadline: Deadline) -> Bool {
        let clock = SystemClock()
        var round = 0
        while state.load(ordering: .acquiring) & ~closedBit != 0 {
            guard !deadline.hasPassed(at: clock.monotonicNanoseconds()) else { return false }
            if round < 50 {
                sched_yield()
            } else {
                var delay = timespec(tv_sec: 0, tv_nsec: 1_000_000)
                nanosleep(&delay, nil)
            }
            round += 1
        }
        return true
    }

    /// The error of a call made after appnorth_shutdown().
    static var refusal: AppNorthError {
        .wrongState("the library was shut down (appnorth_shutdown); no call runs any more, handles may be leaked")
    }
}

@c @implementation
public func appnorth_shutdown(_ timeoutMs: Int32, _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    if let calls = ThreadCalls.current, calls.pointee.inCallback > 0 {
        report(err, code: Int32(APPNORTH_E_WRONG_STATE), httpStatus: 0,
               message: "appnorth_shutdown cannot be called from inside a library callback")
        return Int32(APPNORTH_E_WRONG_STATE)
    }
    guard timeoutMs >= 0 else {
        report(err, code: Int32(APPNORTH_E_INVALID_ARGUMENT), httpStatus: 0, message: "timeout_ms must be 0 or more")
        return Int32(APPNORTH_E_INVALID_ARGUMENT)
    }
    let deadline = Deadline.fromNow(milliseconds: Int(timeoutMs))
    // 1. No host callback starts from now on; calls are refused.
    _ = LibraryGate.close()
    // 2. The handles' own threads stop and are joined (each waits for a
    //    callback of its own in flight); client transfers are cancelled.
    ThreadOwners.stopAll()
    // 3. Callbacks in flight on other threads (a completion on the
    //    transfer thread, a dispatch on a host thread) return.
    guard LibraryGate.waitIdle(until: deadline) else {
        report(err, code: Int32(APPNORTH_E_TIMEOUT), httpStatus: 0,
               message: "a host callback was still running after timeout_ms; none starts any more")
        return Int32(APPNORTH_E_TIMEOUT)
    }
    // 4. Every other library thread (the transfer thread, the operation
    //    workers) ends: the process-wide registry stops and waits for them.
    guard LibraryThreads.stopAll(milliseconds: deadline.remainingMilliseconds(at: SystemClock().monotonicNanoseconds())) else {
        let left = LibraryThreads.running.joined(separator: ", ")
        report(err, code: Int32(APPNORTH_E_TIMEOUT), httpStatus: 0,
               message: "library threads still running after timeout_ms: \(left); none calls the host any more")
        return Int32(APPNORTH_E_TIMEOUT)
    }
    reportSuccess(err)
    return 0
}
