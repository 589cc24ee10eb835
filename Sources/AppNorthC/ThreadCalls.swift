import CThreadCalls

/// This thread's library calls: the handles they use (innermost last) and
/// whether host code the library called back is running. A handle freed on
/// this thread reads it to know whether it may wait for calls in flight.
///
/// The record is a C thread-local (`Sources/CThreadCalls`, global-dynamic
/// TLS: valid in a dlopen()ed library), read through a static inline
/// accessor: every exported call reads it twice, and a pthread key behind
/// a lazy Swift global cost about 45 instructions a read where this costs
/// about 12 (one `__tls_get_addr`). Raw memory: no reference counting and
/// no exclusivity checks on the hot path.
enum ThreadCalls {
    /// This thread's record (zero in a new thread; never nil).
    @inline(__always)
    static var current: UnsafeMutablePointer<appnorth_thread_calls> { appnorth_thread_calls_current() }

    /// Host code the library called back is running on this thread.
    static var inCallback: Bool { current.pointee.in_callback > 0 }

    /// Room for one more handle on the list; false when there is no memory
    /// for it (the call is then not counted).
    @inline(__always)
    static func reserve(_ calls: UnsafeMutablePointer<appnorth_thread_calls>) -> Bool {
        calls.pointee.count < calls.pointee.capacity || appnorth_thread_calls_grow(calls) == 0
    }

    /// Adds a handle entered by `Handle.get` (after `reserve`).
    @inline(__always)
    static func push(_ handle: UnsafeRawPointer, _ calls: UnsafeMutablePointer<appnorth_thread_calls>) {
        calls.pointee.entered.unsafelyUnwrapped[calls.pointee.count] = handle
        calls.pointee.count += 1
    }

    /// A call on this thread is inside `handle`.
    static func contains(_ handle: UnsafeRawPointer) -> Bool {
        anyEntered { $0 == handle }
    }

    /// A handle this thread's calls entered matches.
    static func anyEntered(_ matches: (UnsafeRawPointer) -> Bool) -> Bool {
        let calls = current
        guard let entered = calls.pointee.entered else { return false }
        for i in 0..<calls.pointee.count {
            if let handle = entered[i], matches(handle) { return true }
        }
        return false
    }

    /// Runs the body of an exported function: handles it gets are counted
    /// until it returns.
    static func scope<R>(_ body: () throws -> R) rethrows -> R {
        let calls = current
        let mark = calls.pointee.count
        calls.pointee.scopes += 1
        defer {
            while calls.pointee.count > mark {
                calls.pointee.count -= 1
                Handle.leave(calls.pointee.entered.unsafelyUnwrapped[calls.pointee.count].unsafelyUnwrapped)
            }
            calls.pointee.scopes -= 1
        }
        return try body()
    }

    /// Runs host code the library calls back, through the gate that
    /// appnorth_shutdown() closes: once it is closed the host code is not
    /// called and `refused` is returned instead.
    static func callback<R>(refused: @autoclosure () -> R, _ body: () throws -> R) rethrows -> R {
        guard LibraryGate.enter() else { return refused() }
        defer { LibraryGate.leave() }
        let calls = current
        calls.pointee.in_callback += 1
        defer { calls.pointee.in_callback -= 1 }
        return try body()
    }

    /// A host callback that returns nothing (skipped once shut down).
    static func callback(_ body: () throws -> Void) rethrows {
        try callback(refused: (), body)
    }
}
