import AppNorthCore
import Glibc
import Synchronization

/// Boxes a Swift object as an opaque C handle (one retain, released by
/// `release`), and counts the calls in flight on it.
///
/// - Fork: the box remembers the fork generation it was made in; a handle
///   inherited through fork() is refused in the child, whose copy of the
///   library threads and connections is not alive.
/// - Calls in flight: `get` inside a `guarded` body counts the call on the
///   handle until that body returns. `release` (every appnorth_X_free)
///   refuses new calls at once (APPNORTH_E_WRONG_STATE), runs the handle's
///   teardown, waits for the calls in flight, then frees. Called from inside
///   one of the handle's own calls or from a host callback, it does not wait
///   (that call, or what the callback's thread is busy with, may be what the
///   others wait for): the last call to leave frees the handle.
///
/// The hot-path cost is one compare-and-swap on entry and one atomic
/// decrement on exit, plus this thread's call list (ThreadCalls).
enum Handle {
    fileprivate final class Box {
        let object: AnyObject
        /// The same object, for `borrow`: lent without a retain.
        let unretained: Unmanaged<AnyObject>
        let generation = ForkGuard.generation
        /// Calls in flight (the low bits), `freeing` and `releaseOnLeave`.
        let state = Atomic<UInt>(0)
        init(_ object: AnyObject) {
            self.object = object
            unretained = Unmanaged.passUnretained(object)
        }
    }

    /// Set by `release`: new calls are refused.
    private static let freeing: UInt = 1 << (UInt.bitWidth - 1)
    /// Set by a `release` that did not wait: the last call to leave frees.
    private static let releaseOnLeave: UInt = 1 << (UInt.bitWidth - 2)
    /// A free waits for the calls in flight (`WordWaits`' mark).
    private static let waiter: UInt = 1 << (UInt.bitWidth - 3)
    private static let callsMask: UInt = waiter - 1
    /// The frees waiting for their handles' calls; a fork() child's are its own.
    private static let waits = ForkLocal<WordWaits, Never> { WordWaits() }

    static func make<T: AnyObject>(_ object: T) -> OpaquePointer {
        _ = LibraryPin.pinned
        return OpaquePointer(Unmanaged.passRetained(Box(object)).toOpaque())
    }

    /// The object behind a handle argument, counted as in flight on it until
    /// the enclosing `guarded` body returns.
    static func get<T: AnyObject>(_ handle: OpaquePointer?, as _: T.Type, _ name: String) throws(AppNorthError) -> T {
        let raw = try admit(handle, name).raw
        return Unmanaged<Box>.fromOpaque(raw)._withUnsafeGuaranteedRef { unsafeDowncast($0.object, to: T.self) }
    }

    /// Checks a handle argument and counts the call in flight on it (see
    /// `get`); returns the box's address, and whether the call is counted
    /// (not outside a `guarded` body, nor on a system out of memory).
    private static func admit(_ handle: OpaquePointer?, _ name: String) throws(AppNorthError)
        -> (raw: UnsafeRawPointer, counted: Bool) {
        let raw = UnsafeRawPointer(try required(handle, name))
        let admitted = Unmanaged<Box>.fromOpaque(raw)._withUnsafeGuaranteedRef { box -> Bool? in
            guard box.generation == ForkGuard.generation else { return nil }
            let calls = ThreadCalls.current
            guard calls.pointee.scopes > 0 else { return false }
            // No room for the handle on this thread's list (no memory): not counted.
            guard ThreadCalls.reserve(calls) else { return box.state.load(ordering: .acquiring) & freeing == 0 ? false : nil }
            guard enter(box) else { return nil }
            ThreadCalls.push(raw, calls)
            return true
        }
        guard let counted = admitted else {
            if Unmanaged<Box>.fromOpaque(raw)._withUnsafeGuaranteedRef({ $0.generation == ForkGuard.generation }) {
                throw .wrongState("\(name) is being freed: no call may start once its _free function was called")
            }
            throw .wrongState("\(name) was created before fork(); handles do not survive into a child, make new ones")
        }
        return (raw, counted)
    }

    /// `get` for hot paths: lends the object to `body` without retaining
    /// it. Every thread's retain and release of one object write the same
    /// word (on a side table, once the object has a weak reference), which
    /// keeps threads calling one handle from scaling. Safe because the call
    /// counted in flight keeps the box, which holds the object, alive until
    /// the enclosing `guarded` body returns.
    static func borrow<T: AnyObject, R>(_ handle: OpaquePointer?, as _: T.Type, _ name: String,
                                        _ body: (T) throws -> R) throws -> R {
        let (raw, counted) = try admit(handle, name)
        // Uncounted, nothing else keeps the object alive: take a reference.
        guard counted else { return try body(get(handle, as: T.self, name)) }
        return try Unmanaged<Box>.fromOpaque(raw)._withUnsafeGuaranteedRef { box in
            try box.unretained._withUnsafeGuaranteedRef { try body(unsafeDowncast($0, to: T.self)) }
        }
    }

    /// The hot path of a call that may answer without the error machinery
    /// (appnorth_dispatch with nothing pending, every frame): counts the
    /// call in flight for the length of `peek`, as `get` does, and returns
    /// what `peek` returns; nil when the handle is NULL, being freed or from
    /// before fork() (the caller then takes its full path, which reports
    /// why). `peek` must not call host code or free anything.
    static func peek<T: AnyObject, R>(_ handle: OpaquePointer?, as _: T.Type, _ peek: (T) -> R) -> R? {
        guard let handle else { return nil }
        let raw = UnsafeRawPointer(handle)
        let box = Unmanaged<Box>.fromOpaque(raw)
        let entered = box._withUnsafeGuaranteedRef { $0.generation == ForkGuard.generation && enter($0) }
        guard entered else { return nil }
        defer { leave(raw) }
        return box._withUnsafeGuaranteedRef { box in
            box.unretained._withUnsafeGuaranteedRef { peek(unsafeDowncast($0, to: T.self)) }
        }
    }

    /// Counts one call in flight; false once `release` has begun.
    private static func enter(_ box: Box) -> Bool {
        var state = box.state.load(ordering: .relaxed)
        while true {
            guard state & freeing == 0 else { return false }
            let (done, seen) = box.state.weakCompareExchange(expected: state, desired: state + 1,
                                                            successOrdering: .acquiring, failureOrdering: .relaxed)
            if done { return true }
            state = seen
        }
    }

    /// Ends one call counted by `get`.
    static func leave(_ raw: UnsafeRawPointer) {
        let box = Unmanaged<Box>.fromOpaque(raw)
        let after = box._withUnsafeGuaranteedRef { $0.state.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue }
        if after == freeing | releaseOnLeave { box.release() }
        if after & waiter != 0 { waits.value.wake() }
    }

    /// Whether the handle of `object` that this thread's calls entered is
    /// being freed (its _free has begun, after they entered). False when
    /// no call of this thread entered it.
    static func isBeingFreed(_ object: AnyObject) -> Bool {
        ThreadCalls.anyEntered { raw in
            Unmanaged<Box>.fromOpaque(raw)._withUnsafeGuaranteedRef {
                $0.object === object && $0.state.load(ordering: .acquiring) & freeing != 0
            }
        }
    }

    /// Lends `object` to host code as a handle for the duration of `body`
    /// (the buffer a load callback fills); the host never frees it.
    static func lend<T: AnyObject, R>(_ object: T, refused: R, _ body: (OpaquePointer) throws -> R) rethrows -> R {
        let box = Box(object)
        return try withExtendedLifetime(box) {
            try ThreadCalls.callback(refused: refused) {
                try body(OpaquePointer(Unmanaged.passUnretained(box).toOpaque()))
            }
        }
    }

    /// Frees the handle (see the type's comment); `teardown` stops what the
    /// object runs on its own threads before the calls in flight are waited
    /// for. One inherited through fork() is left alone: its teardown would
    /// wait for threads that do not exist in the child.
    static func release<T: AnyObject>(_ handle: OpaquePointer?, as _: T.Type, teardown: (T) -> Void = { _ in }) {
        // After appnorth_shutdown() a handle is leaked: nothing of it runs.
        guard let handle, !LibraryGate.isClosed else { return }
        let raw = UnsafeRawPointer(handle)
        let box = Unmanaged<Box>.fromOpaque(raw)
        let (object, started): (T, Bool) = box._withUnsafeGuaranteedRef { box in
            guard box.generation == ForkGuard.generation else { return (unsafeDowncast(box.object, to: T.self), false) }
            let before = box.state.bitwiseOr(freeing, ordering: .acquiringAndReleasing).oldValue
            return (unsafeDowncast(box.object, to: T.self), before & freeing == 0)
        }
        // A second free while the first runs, or a handle from before fork().
        guard started else { return }
        teardown(object)
        if ThreadCalls.inCallback || ThreadCalls.contains(raw) {
            let before = box._withUnsafeGuaranteedRef { $0.state.bitwiseOr(releaseOnLeave, ordering: .acquiringAndReleasing).oldValue }
            if before & callsMask == 0 { box.release() }
            return
        }
        box._withUnsafeGuaranteedRef { box in
            _ = waits.value.wait(until: nil, mark: { box.state.bitwiseOr(waiter, ordering: .acquiringAndReleasing) },
                                 unmark: { box.state.bitwiseAnd(~waiter, ordering: .relaxed) },
                                 done: { box.state.load(ordering: .acquiring) & callsMask == 0 })
        }
        box.release()
    }
}
