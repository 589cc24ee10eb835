import Glibc

/// The library's data lock: a value guarded by a pthread mutex, with the
/// same shape as `Synchronization.Mutex` (`withLock`).
///
/// Why not `Mutex` itself (both measured on Linux, Swift 6.3.1):
/// - fork(): `Mutex` writes a thread id that it caches per thread, and the
///   thread that calls fork() keeps its parent's id in the child. A lock it
///   takes in the child and another child thread contends aborts the child
///   in `Synchronization` (5 crashes in 5 runs). glibc's mutex reads the
///   thread id the kernel gives the child, so a child that makes new
///   handles works (docs/architecture.md, "fork()").
/// - ThreadSanitizer does not see `Mutex` and reports false races behind
///   it; it understands pthread mutexes, so `make sanitize` stays useful.
///
/// Every live lock is held across fork() by ForkGuard, so a child never
/// inherits one locked.
///
/// The mutex and the value live at stable heap addresses; the lock is
/// non-copyable like `Mutex`, so it is stored in a `let`. A `padded` lock
/// gives each of them cache lines of their own, for locks that different
/// threads take at once (the event journal's stripes): two small heap
/// blocks side by side would otherwise share a line, and every lock of one
/// would slow the other thread's.
struct Lock<Value: ~Copyable>: ~Copyable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>
    /// Its place in the lock order (`LockLevel`; 0: unordered), checked
    /// in debug builds.
    private let level: Int

    init(_ initialValue: consuming sending Value, padded: Bool = false, level: Int = 0) {
        self.level = level
        if padded {
            mutex = Self.allocatePadded(pthread_mutex_t.self)
            value = Self.allocatePadded(Value.self)
        } else {
            mutex = .allocate(capacity: 1)
            value = .allocate(capacity: 1)
        }
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        ForkGuard.register(mutex)
        value.initialize(to: initialValue)
    }

    /// Whole cache lines (two, for the adjacent-line prefetcher) for one T.
    private static func allocatePadded<T: ~Copyable>(_: T.Type) -> UnsafeMutablePointer<T> {
        let line = 128
        let size = (MemoryLayout<T>.size + line - 1) / line * line
        return UnsafeMutableRawPointer.allocate(byteCount: max(line, size), alignment: max(line, MemoryLayout<T>.alignment))
            .bindMemory(to: T.self, capacity: 1)
    }

    deinit {
        ForkGuard.unregister(mutex)
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held. Never call host code inside it.
    borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        LockOrder.willAcquire(level)
        pthread_mutex_lock(mutex)
        defer {
            pthread_mutex_unlock(mutex)
            LockOrder.released(level)
        }
        return try body(&value.pointee)
    }

    /// For the fork handlers only (ForkGuard): hold the lock across fork().
    borrowing func acquire() { pthread_mutex_lock(mutex) }
    borrowing func release() { pthread_mutex_unlock(mutex) }
}

// The mutex serialises every access to the value, as with `Mutex`.
extension Lock: @unchecked Sendable where Value: ~Copyable {}
