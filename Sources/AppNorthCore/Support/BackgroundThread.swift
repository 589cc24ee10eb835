import Glibc
import CSystem
import Synchronization

/// Lets a thread sleep until it is woken or a timeout passes. Wake-ups are
/// remembered, so one sent before the sleeper waits is not lost.
final class WakeSignal: @unchecked Sendable {
    // @unchecked: `pending` is only touched with the condition's mutex held.
    private let condition = Lock<Void>((), level: LockClass.signal)
    private var pending = false

    /// Wakes the sleeper (or the next one to sleep).
    func wake() {
        condition.locked {
            pending = true
            condition.broadcast()
        }
    }

    /// Sleeps until woken or `milliseconds` pass (nil: no timeout).
    /// Returns true when woken.
    @discardableResult
    func wait(milliseconds: Int?) -> Bool {
        let deadline = milliseconds.map { Deadline.fromNow(milliseconds: $0) }
        return condition.locked {
            condition.wait(until: { pending }, deadline: deadline)
            defer { pending = false }
            return pending
        }
    }
}

/// A library-owned thread (event uploads, config stream). `stop()` asks it
/// to end, wakes it and joins it, so that no library thread outlives the
/// handle that owns it: a host that closes a handle, or a Python binding
/// that closes handles at interpreter exit, never has library code running
/// afterwards.
final class BackgroundThread: @unchecked Sendable {
    // @unchecked: `thread` is written once, before `start` returns, and
    // read only by stop() and isCurrent (the body's own calls wait for it).
    let name: String
    let signal = WakeSignal()
    private let stopping = Atomic<Bool>(false)
    private var thread: LibraryThread?
    private let ready = Lock<Void>((), level: LockClass.threadOwner)

    /// Starts the thread at once.
    init(name: String, body: @escaping @Sendable (BackgroundThread) -> Void) throws(AppNorthError) {
        self.name = name
        try ready.locked { () throws(AppNorthError) in
            thread = try LibraryThread.spawn(name, joinable: true, stop: { [weak self] in
                self?.stopping.store(true, ordering: .releasing)
                self?.signal.wake()
            }) { [self] in
                ready.locked {}  // `thread` is set
                body(self)
            }
        }
    }

    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Wakes the thread early from `sleep`.
    func wake() { signal.wake() }

    /// Sleeps up to `milliseconds` or until woken. Returns false when the
    /// thread should end.
    func sleep(milliseconds: Int?) -> Bool {
        if isStopping { return false }
        signal.wait(milliseconds: milliseconds)
        return !isStopping
    }

    /// True when called on this thread (for instance from a host callback
    /// that the thread is running).
    var isCurrent: Bool { thread?.isCurrent ?? false }

    /// Ends the thread and waits for it, unless called from the thread
    /// itself (then it ends when its body returns). Idempotent.
    func stop() {
        thread?.stop()
        thread?.join()
    }
}

/// A counter that threads can wait to reach, or ask to be told of: flush
/// callers wait for the upload thread to finish the cycle they asked for,
/// and a non-blocking flush is told.
final class GenerationWaiter: @unchecked Sendable {
    // @unchecked: `value` and `pending` are only touched with the
    // condition's mutex held.
    private let condition = Lock<Void>((), level: LockClass.signal)
    private var value: UInt64 = 0
    /// Actions for a value not reached yet (`whenReached`), in no order.
    private var pending: [(target: UInt64, action: @Sendable () -> Void)] = []

    /// Moves the counter to at least `target` and wakes every waiter; then
    /// runs, on this thread and with no lock held, the actions it reached.
    func advance(to target: UInt64) {
        let due = condition.locked { () -> [@Sendable () -> Void] in
            if target > value { value = target }
            condition.broadcast()
            guard pending.contains(where: { $0.target <= value }) else { return [] }
            let reached = pending.filter { $0.target <= value }.map(\.action)
            pending.removeAll { $0.target <= value }
            return reached
        }
        for action in due { action() }
    }

    /// Runs `action` once the counter reaches `target`: now, on this thread,
    /// if it has; otherwise on the thread that moves it there. Keep it short
    /// (it runs on that thread, with no lock held).
    func whenReached(_ target: UInt64, _ action: @escaping @Sendable () -> Void) {
        let reached = condition.locked { () -> Bool in
            if value >= target { return true }
            pending.append((target, action))
            return false
        }
        if reached { action() }
    }

    /// Waits until the counter reaches `target` or `milliseconds` pass.
    /// Returns true when it was reached.
    func wait(for target: UInt64, milliseconds: Int) -> Bool {
        let deadline = Deadline.fromNow(milliseconds: milliseconds)
        return condition.locked {
            condition.wait(until: { value >= target }, deadline: deadline)
            return value >= target
        }
    }
}

extension LockClass {
    /// `BackgroundThread.ready`: a `BackgroundThread` being started (its owner's hold while
    /// the thread's `LibraryThread` is made).
    static let threadOwner = LockClass(rank: 70, "BackgroundThread.ready")
    /// `WakeSignal.condition`: a `WakeSignal`, a `GenerationWaiter`, or the C layer's
    /// `WordWaits` (the callback gate's and the handles' waits).
    package static let signal = LockClass.leaf("WakeSignal.condition")
}
