import CSQLite
import Glibc
import Synchronization

/// Makes fork() safe for a child that creates new handles.
///
/// A lock that another thread holds at the moment of fork() stays locked
/// forever in the child, whose only thread is the forking one. Measured: 9
/// children in 150 forks of a busy parent hung in `sqlite3Malloc` on
/// SQLite's global memory mutex. So `pthread_atfork` handlers, installed
/// when the first `Lock` is made, quiesce the library across fork():
/// prepare takes every live `Lock` made `.quiesce` (so no library thread is
/// inside SQLite or halfway through a data structure) and SQLite's static
/// mutexes; parent and child release them. In the child every lock's
/// condition variable, and the mutex of each `.reinitialize` lock, is made
/// anew (no thread of the parent waits or holds there any more). The child
/// also bumps `generation`, by which the C layer refuses handles inherited
/// from the parent and every `ForkLocal` makes its value anew.
///
/// Locks are taken by try-and-back-off, never by waiting while holding
/// another, so lock order cannot deadlock the fork; a lock that stays busy
/// for 10 s is given up on, and the fork goes ahead unquiesced rather than
/// hang the parent.
package enum ForkGuard {
    /// 0 in the process that loaded the library; +1 in each forked child
    /// (a grandchild counts from its parent's value).
    package static var generation: UInt64 { generationCell.load(ordering: .acquiring) }

    /// `generation`'s word: a static of its own, initialized at load time
    /// (a constant), so a read is one load; read through the lazily made
    /// `forkState` it cost every exported call a `swift_once` (two per
    /// `track`, about 25 instructions, callgrind).
    // process-wide, not a ForkLocal: ForkGuard is what ForkLocal is made of; its child
    // handler moves the generation.
    fileprivate static let generationCell = Atomic<UInt64>(0)

    /// Called by every `Lock` init; the first call installs the handlers.
    static func register(_ cell: UnsafeMutablePointer<LockCell>) {
        let state = forkState
        pthread_mutex_lock(state.registry)
        state.locks.insert(cell)
        pthread_mutex_unlock(state.registry)
    }

    static func unregister(_ cell: UnsafeMutablePointer<LockCell>) {
        let state = forkState
        pthread_mutex_lock(state.registry)
        state.locks.remove(cell)
        pthread_mutex_unlock(state.registry)
    }

    /// Live locks of the library (for tests: every lock is registered).
    static var registeredLocks: Int {
        let state = forkState
        pthread_mutex_lock(state.registry)
        defer { pthread_mutex_unlock(state.registry) }
        return state.locks.count
    }

    /// A descriptor a forked child must not keep: the child closes it as it
    /// starts. For event journals, whose `flock` would otherwise stay held
    /// by the child after the parent dies, keeping the parent's journal
    /// from being recovered for as long as the child lives.
    static func closeInChild(_ fd: Int32) {
        let state = forkState
        pthread_mutex_lock(state.registry)
        state.childCloses.insert(fd)
        pthread_mutex_unlock(state.registry)
    }

    /// Runs `hook` in every forked child, on its only thread, once the
    /// locks are usable again and before the child's code goes on: for
    /// process-wide state that is neither a lock nor a `ForkLocal` (the C
    /// layer's callback gate counts callbacks that ran on threads the child
    /// does not have). A hook must not wait for anything.
    package static func inChild(_ hook: @escaping @Sendable () -> Void) {
        let state = forkState
        pthread_mutex_lock(state.registry)
        state.childHooks.append(hook)
        pthread_mutex_unlock(state.registry)
    }

    /// Undoes `closeInChild` (the descriptor is about to be closed).
    static func keepInChild(_ fd: Int32) {
        let state = forkState
        pthread_mutex_lock(state.registry)
        state.childCloses.remove(fd)
        pthread_mutex_unlock(state.registry)
    }
}

/// One lock the prepare handler holds across fork().
private enum Quiesced {
    case lock(UnsafeMutablePointer<LockCell>)
    case sqlite(OpaquePointer)

    func tryAcquire() -> Bool {
        switch self {
        case .lock(let m): return m.tryLock()
        case .sqlite(let m): return sqlite3_mutex_try(m) == SQLITE_OK
        }
    }

    /// Waits for the lock while the caller holds no other: briefly for a
    /// library lock (its holder may itself wait for the registry), fully
    /// for SQLite's (held only inside SQLite calls, which never wait for
    /// ours).
    func waitAcquire() -> Bool {
        switch self {
        case .lock(let m):
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_nsec += 2_000_000
            if deadline.tv_nsec >= 1_000_000_000 {
                deadline.tv_sec += 1
                deadline.tv_nsec -= 1_000_000_000
            }
            return m.lock(before: deadline)
        case .sqlite(let m):
            sqlite3_mutex_enter(m)
            return true
        }
    }

    func release() {
        switch self {
        case .lock(let m): m.rawUnlock()
        case .sqlite(let m): sqlite3_mutex_leave(m)
        }
    }
}

private final class ForkState: @unchecked Sendable {
    // @unchecked: `locks`, `childCloses`, `childHooks`, `held` and `registryHeld` are only touched with
    // `registry` locked, or by the fork handlers of the one forking thread.
    let registry: UnsafeMutablePointer<pthread_mutex_t>
    var locks = Set<UnsafeMutablePointer<LockCell>>()
    var childCloses = Set<Int32>()
    var childHooks: [@Sendable () -> Void] = []
    var held: [Quiesced] = []
    var registryHeld = false
    let sqliteMutexes: [Quiesced]

    init() {
        registry = .allocate(capacity: 1)
        registry.initialize(to: pthread_mutex_t())
        pthread_mutex_init(registry, nil)
        // SQLite's static mutexes (2...13: main, mem, open, prng, lru,
        // pmem, app1-3, vfs1-3); NULL when SQLite was built without mutexes.
        sqliteMutexes = (SQLITE_MUTEX_STATIC_MAIN...SQLITE_MUTEX_STATIC_VFS3).compactMap {
            sqlite3_mutex_alloc($0).map(Quiesced.sqlite)
        }
    }

    func prepare() {
        let giveUp = Deadline.fromNow(milliseconds: 10_000)
        while true {
            pthread_mutex_lock(registry)
            let all = locks.filter { $0.pointee.atFork == .quiesce }.map(Quiesced.lock) + sqliteMutexes
            if acquireAll(all) {
                held = all
                registryHeld = true
                return
            }
            pthread_mutex_unlock(registry)
            if giveUp.hasPassed(at: SystemClock().monotonicNanoseconds()) { return }
            sched_yield()
        }
    }

    /// One round: try-locks every item; at the first busy one, releases the
    /// others, waits for that one alone, then tries the rest once more.
    private func acquireAll(_ all: [Quiesced]) -> Bool {
        guard let busy = tryAll(all, except: nil) else { return true }
        guard all[busy].waitAcquire() else { return false }
        if tryAll(all, except: busy) == nil { return true }
        all[busy].release()
        return false
    }

    /// Try-locks every item but `except`. At a busy one, releases what it
    /// took and returns that item's index; nil when it holds them all.
    private func tryAll(_ all: [Quiesced], except: Int?) -> Int? {
        for i in all.indices where i != except {
            if !all[i].tryAcquire() {
                for j in (0..<i).reversed() where j != except { all[j].release() }
                return i
            }
        }
        return nil
    }

    func release(child: Bool) {
        if child {
            ForkGuard.generationCell.add(1, ordering: .releasing)
            // The child's only thread runs this: no other can race the set.
            for fd in childCloses { close(fd) }
            childCloses.removeAll()
        }
        for item in held.reversed() { item.release() }
        held = []
        // No thread of the parent waits on a condition here, or holds a
        // lock that was not quiesced.
        if child {
            for cell in locks { cell.reinitializeInChild() }
            for hook in childHooks { hook() }
        }
        if registryHeld {
            registryHeld = false
            pthread_mutex_unlock(registry)
        }
    }
}

// process-wide, not a ForkLocal: the fork handlers' own registry of locks, kept right in a child
// by the handlers themselves.
private let forkState: ForkState = {
    let state = ForkState()
    pthread_atfork({ forkState.prepare() },
                   { forkState.release(child: false) },
                   { forkState.release(child: true) })
    return state
}()
