import CSystem
import Glibc
import Synchronization

/// Every thread the library starts: spawned, named and, when joinable,
/// joined here, and listed while it runs in this process's registry
/// (`LibraryThreads`): the events uploaders, config streams, the transfer
/// thread and the workers. No other file calls pthread_create.
final class LibraryThread: @unchecked Sendable {
    // @unchecked: `thread` is written before any other thread can see this
    // object (the new thread waits for it on `started`); `body` is only
    // touched by the new thread (dropped once run: it may hold the owner,
    // which holds this); `joined` is atomic.
    let name: String
    private var thread = pthread_t()
    private let joinable: Bool
    private let joined = Atomic<Bool>(false)
    private let started = Lock<Bool>(false, level: LockClass.threadStart)
    private var body: (@Sendable () -> Void)?
    /// Asks the thread to end soon (for `LibraryThreads.stopAll`).
    let stop: @Sendable () -> Void

    /// Starts `body` on a new thread named `name` (the first 15 bytes show
    /// in /proc/<pid>/task/*/comm, top and gdb). A joinable thread must be
    /// joined by its owner (`join`); a detached one ends on its own.
    /// `stop` asks it to end (and is what a process-wide stop calls).
    @discardableResult
    static func spawn(_ name: String, joinable: Bool, stop: @escaping @Sendable () -> Void,
                      _ body: @escaping @Sendable () -> Void) throws(AppNorthError) -> LibraryThread {
        let me = LibraryThread(name: name, joinable: joinable, stop: stop, body: body)
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if !joinable { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        guard LibraryThreads.add(me) else { throw .wrongState("the library is shut down (appnorth_shutdown): no thread starts") }
        let context = Unmanaged.passRetained(me).toOpaque()
        let rc = me.started.withLock { started in
            let rc = pthread_create(&me.thread, &attributes, { raw in
                guard let raw else { return nil }
                let me = Unmanaged<LibraryThread>.fromOpaque(raw).takeRetainedValue()
                me.run()
                return nil
            }, context)
            started = rc == 0
            return rc
        }
        if rc != 0 {
            Unmanaged<LibraryThread>.fromOpaque(context).release()
            LibraryThreads.remove(me)
            throw .internal("cannot start the \(name) thread (error \(rc))")
        }
        return me
    }

    private init(name: String, joinable: Bool, stop: @escaping @Sendable () -> Void, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.joinable = joinable
        self.stop = stop
        self.body = body
    }

    private func run() {
        _ = started.withLock { $0 }  // `thread` is written
        appnorth_set_thread_name(name)
        let body = self.body
        self.body = nil
        body?()
        LibraryThreads.remove(self)
    }

    /// True when called on this thread (for instance from a host callback
    /// that the thread is running).
    var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// Waits for a joinable thread to end, unless called from the thread
    /// itself (then it is detached and ends when its body returns).
    /// Idempotent; does nothing for a detached thread.
    func join() {
        guard joinable, joined.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        if isCurrent {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// The library threads running in this process (a fork() child starts
/// with none: its parent's do not exist there).
package enum LibraryThreads {
    private final class Registry: Sendable {
        let threads = Lock<[ObjectIdentifier: LibraryThread]>([:], level: LockClass.threadRegistry)
        /// Set, under `threads`, by `requestStopAll` (appnorth_shutdown, for
        /// good): a thread started after it would never be asked to stop (a
        /// transfer engine made again by an uploader's last send, say), so
        /// none starts.
        let closed = Atomic<Bool>(false)
    }

    private static let registry = ForkLocal<Registry, Never>(level: LockClass.threadRegistrySlot) { Registry() }

    /// Registers a thread about to start; false once the library is shut down.
    fileprivate static func add(_ thread: LibraryThread) -> Bool {
        let registry = registry.value
        return registry.threads.withLock {
            if registry.closed.load(ordering: .relaxed) { return false }
            $0[ObjectIdentifier(thread)] = thread
            return true
        }
    }

    fileprivate static func remove(_ thread: LibraryThread) {
        let registry = registry.value
        registry.threads.withLock {
            $0[ObjectIdentifier(thread)] = nil
            registry.threads.broadcast()
        }
    }

    /// The names of the library threads running now, sorted.
    package static var running: [String] {
        registry.value.threads.withLock { $0.values.map(\.name) }.sorted()
    }

    /// Asks every library thread to end, without waiting, and refuses new
    /// ones from now on (appnorth_shutdown is for good).
    package static func requestStopAll() {
        let registry = registry.value
        let all = registry.threads.withLock { threads in
            registry.closed.store(true, ordering: .relaxed)
            return Array(threads.values)
        }
        for thread in all { thread.stop() }
    }

    /// Asks every library thread to end and waits up to `milliseconds`
    /// for them (not for the calling thread, if it is one); once none is
    /// left, joins the joinable ones (their owners' later joins return at
    /// once), so they are gone from the process too. True when none is left.
    package static func stopAll(milliseconds: Int) -> Bool {
        let registry = registry.value
        let all = registry.threads.withLock { Array($0.values) }
        for thread in all { thread.stop() }
        let deadline = Deadline.fromNow(milliseconds: max(0, milliseconds))
        let ended = registry.threads.withLock { live in
            registry.threads.wait(until: { live.values.allSatisfy(\.isCurrent) }, deadline: deadline)
            return live.values.allSatisfy(\.isCurrent)
        }
        if ended { for thread in all where !thread.isCurrent { thread.join() } }
        return ended
    }
}

extension LockClass {
    /// `LibraryThreads.registry`: the thread registry's `ForkLocal` slot (taken inside a
    /// `ForkLocal.slot`: a `make` that starts a thread).
    static let threadRegistrySlot = LockClass(rank: 80, "LibraryThreads.registry")
    /// `LibraryThreads.threads`: the list of running library threads.
    static let threadRegistry = LockClass(rank: 85, "LibraryThreads.threads")
    /// `LibraryThread.started`: a `LibraryThread` being started (its new thread waits on it).
    static let threadStart = LockClass(rank: 90, "LibraryThread.started")
}
