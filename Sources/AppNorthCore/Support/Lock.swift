import Glibc

/// The library's one lock: a value guarded by a pthread mutex, with a
/// condition variable (timeouts on the monotonic clock) to wait on it.
/// Every lock of the core is one of these, with its `LockClass` (its place
/// in the lock order; scripts/check-toolkit.py fails on a
/// `pthread_mutex_init` anywhere else).
///
/// Why not `Synchronization.Mutex` (both measured on Linux, Swift 6.3.1):
/// - fork(): `Mutex` writes a thread id that it caches per thread, and the
///   thread that calls fork() keeps its parent's id in the child. A lock it
///   takes in the child and another child thread contends aborts the child
///   in `Synchronization` (5 crashes in 5 runs). glibc's mutex reads the
///   thread id the kernel gives the child, so a child that makes new
///   handles works (docs/architecture.md, "fork()").
/// - ThreadSanitizer does not see `Mutex` and reports false races behind
///   it; it understands pthread mutexes, so `make sanitize` stays useful.
///
/// fork(): every live lock is registered with ForkGuard as it is made.
/// A `.quiesce` lock (the default) is held by the forking thread across
/// fork(), so a child never inherits one locked or its data half-written;
/// a `.reinitialize` lock (one held while host code runs: `OperationGate`)
/// is not waited for, and is made anew in the child. Either way every
/// condition variable is made anew in the child (its parent's waiters do
/// not exist there), so every lock is usable in a child.
///
/// The mutex, condition and value live at stable heap addresses; the lock
/// is non-copyable like `Mutex`, so it is stored in a `let`. A `padded`
/// lock gives its mutex and value cache lines of their own, for locks that
/// different threads take at once (the event journal's stripes).
package struct Lock<Value: ~Copyable>: ~Copyable {
    private let cell: UnsafeMutablePointer<LockCell>
    private let value: UnsafeMutablePointer<Value>

    /// `level`: its place in the lock order (a `LockClass`, declared beside
    /// the lock's owner), which every lock states: there is no default.
    package init(_ initialValue: consuming sending Value, padded: Bool = false, level: LockClass,
         atFork: LockCell.AtFork = .quiesce) {
        cell = LockCell.make(padded: padded, level: level, atFork: atFork)
        value = padded ? Self.allocatePadded(Value.self) : .allocate(capacity: 1)
        value.initialize(to: initialValue)
        ForkGuard.register(cell)
    }

    /// Whole cache lines (two, for the adjacent-line prefetcher) for one T.
    static func allocatePadded<T: ~Copyable>(_: T.Type) -> UnsafeMutablePointer<T> {
        let line = 128
        let size = (MemoryLayout<T>.size + line - 1) / line * line
        return UnsafeMutableRawPointer.allocate(byteCount: max(line, size), alignment: max(line, MemoryLayout<T>.alignment))
            .bindMemory(to: T.self, capacity: 1)
    }

    deinit {
        ForkGuard.unregister(cell)
        value.deinitialize(count: 1)
        value.deallocate()
        LockCell.destroy(cell)
    }

    /// Runs `body` with the lock held. Never call host code inside it
    /// (`unlocked` first), except under an `OperationGate`.
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        cell.lock()
        defer { cell.unlock() }
        return try body(&value.pointee)
    }

    /// With the lock held: waits until `done()` or the deadline (nil:
    /// none), a `Deadline` on `SystemClock` (CLOCK_MONOTONIC, the clock the
    /// condition's timeouts run on). `done` is checked with the lock held.
    package borrowing func wait(until done: () -> Bool, deadline: Deadline?) {
        cell.wait(until: done, deadline: deadline)
    }

    /// With the lock held: wakes every thread waiting on it.
    package borrowing func broadcast() { cell.broadcast() }

    /// With the lock held (and no reference into the value kept): runs
    /// `body` with it released (to call host code), then takes it again.
    package borrowing func unlocked<T>(_ body: () throws -> T) rethrows -> T {
        cell.unlock()
        defer { cell.lock() }
        return try body()
    }
}

extension Lock where Value == Void {
    /// A lock that guards no value of its own (the owner's fields, only
    /// touched inside): `withLock` without the argument.
    package borrowing func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        cell.lock()
        defer { cell.unlock() }
        return try body()
    }

    /// Runs `body` with the lock held if it is free now; returns nil at
    /// once, without waiting, if another thread holds it. A try never
    /// waits, so it cannot deadlock: the lock order records it as held
    /// without checking it.
    package borrowing func lockedIfFree<T>(_ body: () -> T) -> T? {
        guard cell.tryLockOrdered() else { return nil }
        defer { cell.unlock() }
        return body()
    }
}

// The mutex serialises every access to the value, as with `Mutex`.
extension Lock: @unchecked Sendable where Value: ~Copyable {}

/// A lock's pthread mutex and condition, its level and what fork() does
/// with it: what ForkGuard holds for each live `Lock`.
package struct LockCell {
    package enum AtFork {
        /// Held across fork() by the forking thread (the data it guards is
        /// never half-written in the child).
        case quiesce
        /// Not waited for at fork() (its holder may be running host code
        /// for as long as the host likes); made anew in the child.
        case reinitialize
    }

    var mutex = pthread_mutex_t()
    var cond = pthread_cond_t()
    let lockClass: LockClass
    /// Whether the lock order is checked for this lock (checked and not
    /// an `OperationGate`): an acquisition then reads no global
    /// (`LockOrder.checked` is lazy).
    let checked: Bool
    let atFork: AtFork

    @inline(never)
    static func make(padded: Bool, level: LockClass, atFork: AtFork) -> UnsafeMutablePointer<LockCell> {
        let cell = padded ? Lock<Void>.allocatePadded(LockCell.self) : .allocate(capacity: 1)
        cell.initialize(to: LockCell(lockClass: level, checked: LockOrder.checked && level.isChecked, atFork: atFork))
        pthread_mutex_init(&cell.pointee.mutex, nil)
        cell.initCondition()
        return cell
    }

    static func destroy(_ cell: UnsafeMutablePointer<LockCell>) {
        pthread_cond_destroy(&cell.pointee.cond)
        pthread_mutex_destroy(&cell.pointee.mutex)
        cell.deinitialize(count: 1)
        cell.deallocate()
    }
}

// The pthread calls take the fields' addresses through the pointer (never
// through a copy of the struct): the mutex and condition never move.
extension UnsafeMutablePointer where Pointee == LockCell {
    /// In a fork() child, whose only thread is the forking one: a mutex
    /// nobody in this process holds any more (`.reinitialize`), and a
    /// condition with none of its parent's waiters.
    func reinitializeInChild() {
        if pointee.atFork == .reinitialize { pthread_mutex_init(&pointee.mutex, nil) }
        // Not pthread_cond_destroy: it would wait for the parent's waiters.
        initCondition()
    }

    func initCondition() {
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(&pointee.cond, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    func lock() {
        if pointee.checked { LockOrder.willAcquire(self) }
        pthread_mutex_lock(&pointee.mutex)
    }

    func unlock() {
        pthread_mutex_unlock(&pointee.mutex)
        if pointee.checked { LockOrder.released(self) }
    }

    func tryLock() -> Bool { pthread_mutex_trylock(&pointee.mutex) == 0 }

    /// `tryLock` with the lock-order bookkeeping (`unlock` clears it).
    func tryLockOrdered() -> Bool {
        guard tryLock() else { return false }
        if pointee.checked { LockOrder.acquiredByTry(self) }
        return true
    }

    /// Waits up to `timeout` (absolute, CLOCK_REALTIME, as
    /// pthread_mutex_timedlock takes it) for the mutex; for ForkGuard only.
    func lock(before timeout: timespec) -> Bool {
        var timeout = timeout
        return pthread_mutex_timedlock(&pointee.mutex, &timeout) == 0
    }

    /// Releases the mutex without the lock-order bookkeeping (ForkGuard).
    func rawUnlock() { pthread_mutex_unlock(&pointee.mutex) }

    func broadcast() { pthread_cond_broadcast(&pointee.cond) }

    func wait(until done: () -> Bool, deadline: Deadline?) {
        if var timeout = deadline?.monotonicTimespec {
            while !done() {
                if pthread_cond_timedwait(&pointee.cond, &pointee.mutex, &timeout) == ETIMEDOUT { break }
            }
        } else {
            while !done() { pthread_cond_wait(&pointee.cond, &pointee.mutex) }
        }
    }
}
