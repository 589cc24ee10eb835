import AppNorthCore
import Glibc
import Synchronization

/// The process-wide gate every host callback passes (ThreadCalls.callback).
/// One word holds its three facts:
/// - closed (appnorth_shutdown): no host callback starts again, every call
///   that goes through `guarded` is refused, and `_free` leaks the handle;
/// - held (appnorth_callbacks_hold, a runtime's before-fork hook): a host
///   callback about to start waits at the gate until the hold is resumed,
///   unless its thread is the holding one; nothing is dropped;
/// - the number of host callbacks running now.
/// In a forked child the count is the forking thread's own callbacks (the
/// others ran on threads the child does not have), and the holds its own.
/// A thread that waits for the word to change (a hold for the callbacks
/// running, a callback for a resume, a shutdown for the callbacks) sleeps
/// (`WordWaits`, the waiter bit its mark); a change that sees it wakes it.
enum LibraryGate {
    private static let closedBit: UInt = 1 << (UInt.bitWidth - 1)
    private static let waiterBit: UInt = 1 << (UInt.bitWidth - 2)
    private static let holdUnit: UInt = 1 << 32
    private static let holdMask: UInt = (waiterBit - 1) & ~(holdUnit - 1)
    private static let runningMask: UInt = holdUnit - 1
    // process-wide, not a ForkLocal: one word every host callback reads without a lock; a
    // fork() child keeps its forking thread's own callbacks and holds in it (`resetInChild`,
    // a ForkGuard.inChild handler), which a ForkLocal made anew on a later thread's first
    // use could not know.
    private static let state = Atomic<UInt>(0)
    /// The threads waiting for the word to change; a fork() child makes
    /// its own (`resetInChild` clears the waiter bit).
    private static let waits = ForkLocal<WordWaits, Never> { WordWaits() }
    /// Installs the child's reset with the first callback or hold.
    // process-wide, not a ForkLocal: installs a fork handler once per process image; a child
    // inherits it installed.
    private static let childReset: Void = ForkGuard.inChild { LibraryGate.resetInChild() }

    static var isClosed: Bool { state.load(ordering: .acquiring) & closedBit != 0 }

    /// Counts one host callback; false once the gate is closed. While the
    /// gate is held (by another thread), waits for the resume first.
    static func enter() -> Bool {
        _ = childReset
        var seen = state.load(ordering: .relaxed)
        while true {
            guard seen & closedBit == 0 else { return false }
            if seen & holdMask != 0, ThreadCalls.current.pointee.holding == 0 {
                seen = waitWhileHeld()
                continue
            }
            let (done, now) = state.weakCompareExchange(expected: seen, desired: seen + 1,
                                                       successOrdering: .acquiring, failureOrdering: .relaxed)
            if done { return true }
            seen = now
        }
    }

    static func leave() { wakeWaiters(state.wrappingSubtract(1, ordering: .releasing).oldValue) }

    /// Closes the gate (again: harmless). Returns whether it was open.
    static func close() -> Bool {
        let old = state.bitwiseOr(closedBit, ordering: .acquiringAndReleasing).oldValue
        wakeWaiters(old)
        return old & closedBit == 0
    }

    /// After a change of the word that was `old` before it: wakes the
    /// threads waiting, if `old` says there are. (The change and the
    /// waiter's setting of the bit are both read-modify-writes of the
    /// word: one of them sees the other.)
    @inline(__always)
    private static func wakeWaiters(_ old: UInt) {
        if old & waiterBit != 0 { waits.value.wake() }
    }

    /// Holds the gate for this thread: from now on no host callback starts
    /// on another thread until `resume`. Then waits until none runs on
    /// another thread (this thread's own, when it holds from inside a
    /// callback, are not waited for), or the deadline.
    /// nil when `maxHolds` holds are in place already (a host that holds
    /// without resuming): nothing is held then.
    static func hold(until deadline: Deadline) -> Bool? {
        _ = childReset
        var seen = state.load(ordering: .relaxed)
        while true {
            guard seen & holdMask < maxHolds * holdUnit else { return nil }
            let (done, now) = state.weakCompareExchange(expected: seen, desired: seen + holdUnit,
                                                       successOrdering: .acquiringAndReleasing,
                                                       failureOrdering: .relaxed)
            if done { break }
            seen = now
        }
        let calls = ThreadCalls.current
        calls.pointee.holding += 1
        let own = UInt(max(0, calls.pointee.in_callback))
        return wait(until: deadline) { $0 & runningMask <= own }
    }

    /// Holds in place at once, at most: far above any runtime's nesting,
    /// far below the word's 31 bits (which would reach the closed bit).
    static let maxHolds: UInt = 1 << 16

    /// Ends one hold of this thread (or, from a thread that holds none,
    /// one hold of any thread); none left: nothing.
    static func resume() {
        let calls = ThreadCalls.current
        if calls.pointee.holding > 0 { calls.pointee.holding -= 1 }
        var seen = state.load(ordering: .relaxed)
        while seen & holdMask != 0 {
            let (done, now) = state.weakCompareExchange(expected: seen, desired: seen - holdUnit,
                                                       successOrdering: .acquiringAndReleasing,
                                                       failureOrdering: .relaxed)
            if done { return wakeWaiters(seen) }
            seen = now
        }
    }

    /// Waits until no host callback runs, or the deadline.
    static func waitIdle(until deadline: Deadline) -> Bool {
        wait(until: deadline) { $0 & runningMask == 0 }
    }

    /// The error of a call made after appnorth_shutdown().
    static var refusal: AppNorthError {
        .wrongState("the library was shut down (appnorth_shutdown); no call runs any more, handles may be leaked")
    }

    /// Until the gate is neither held nor open and held: the word seen then.
    private static func waitWhileHeld() -> UInt {
        var seen = state.load(ordering: .acquiring)
        _ = wait(until: nil) { word in
            seen = word
            return word & holdMask == 0 || word & closedBit != 0
        }
        return seen
    }

    /// Waits until `done` says so of the word, or the deadline (nil: none).
    private static func wait(until deadline: Deadline?, _ done: (UInt) -> Bool) -> Bool {
        waits.value.wait(until: deadline, mark: { state.bitwiseOr(waiterBit, ordering: .acquiringAndReleasing) },
                         unmark: { state.bitwiseAnd(~waiterBit, ordering: .relaxed) },
                         done: { done(state.load(ordering: .acquiring)) })
    }

    /// In a forked child, on its only thread: its own callbacks and holds.
    private static func resetInChild() {
        let calls = ThreadCalls.current.pointee
        let running = UInt(max(0, calls.in_callback))
        let holds = UInt(min(max(0, calls.holding), Int(maxHolds)))
        let closed = state.load(ordering: .relaxed) & closedBit
        state.store(closed | holds * holdUnit | running, ordering: .releasing)
    }
}
