import Glibc
import CSystem
import Synchronization

/// A pthread mutex and a condition variable whose timeouts run on the
/// monotonic clock, at stable heap addresses. The building block of
/// WakeSignal and GenerationWaiter.
final class MonotonicCondition: @unchecked Sendable {
    // @unchecked: used only through pthread calls, which synchronise.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let cond: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        cond = .allocate(capacity: 1)
        cond.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held.
    func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// With the mutex held: runs `body` with it released (to call host
    /// code), then takes it again.
    func unlocked<T>(_ body: () -> T) -> T {
        pthread_mutex_unlock(mutex)
        defer { pthread_mutex_lock(mutex) }
        return body()
    }

    /// With the mutex held: wakes every waiter.
    func broadcast() { pthread_cond_broadcast(cond) }

    /// With the mutex held: waits until `done()` or the deadline (nil:
    /// none), a `Deadline` on `SystemClock` (CLOCK_MONOTONIC, the clock the
    /// condition's timeouts run on).
    func wait(until done: () -> Bool, deadline: Deadline?) {
        if var timeout = deadline?.monotonicTimespec {
            while !done() {
                if pthread_cond_timedwait(cond, mutex, &timeout) == ETIMEDOUT { break }
            }
        } else {
            while !done() { pthread_cond_wait(cond, mutex) }
        }
    }
}

/// Lets a thread sleep until it is woken or a timeout passes. Wake-ups are
/// remembered, so one sent before the sleeper waits is not lost.
final class WakeSignal: @unchecked Sendable {
    // @unchecked: `pending` is only touched with the condition's mutex held.
    private let condition = MonotonicCondition()
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
    // @unchecked: `thread` is written once before any other thread can see
    // this object, and read only by stop().
    let name: String
    let signal = WakeSignal()
    private let stopping = Atomic<Bool>(false)
    private let joined = Atomic<Bool>(false)
    private var thread = pthread_t()
    private let body: @Sendable (BackgroundThread) -> Void

    /// Starts the thread at once.
    init(name: String, body: @escaping @Sendable (BackgroundThread) -> Void) throws(AppNorthError) {
        self.name = name
        self.body = body
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { raw in
            let me = Unmanaged<BackgroundThread>.fromOpaque(raw!).takeRetainedValue()
            // Visible in /proc/<pid>/task/*/comm, top and gdb (15 bytes at most).
            appnorth_set_thread_name(me.name)
            me.body(me)
            return nil
        }, context)
        if rc != 0 {
            Unmanaged<BackgroundThread>.fromOpaque(context).release()
            throw .internal("cannot start the \(name) thread (error \(rc))")
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
    var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// Ends the thread and waits for it, unless called from the thread
    /// itself (then it ends when its body returns). Idempotent.
    func stop() {
        stopping.store(true, ordering: .releasing)
        signal.wake()
        guard joined.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        if isCurrent {
            pthread_detach(thread)  // it ends when its body returns
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// A counter that threads can wait to reach, or ask to be told of: flush
/// callers wait for the upload thread to finish the cycle they asked for,
/// and a non-blocking flush is told.
final class GenerationWaiter: @unchecked Sendable {
    // @unchecked: `value` and `pending` are only touched with the
    // condition's mutex held.
    private let condition = MonotonicCondition()
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
