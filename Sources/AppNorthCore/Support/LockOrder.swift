import Glibc

/// The order in which the event queue's locks nest (docs/architecture.md,
/// "Lock order"), checked in debug builds: a thread may take a lock only
/// if it holds none of the same or a later level. Level 0 is unordered
/// (every other lock of the library): not checked.
enum LockLevel {
    /// An `OperationGate`: a queue's or cache's turn, held while its host
    /// storage callbacks run (they may call the library: every lock nests
    /// inside it).
    static let gate = 0
    /// `AppNorthEvents.consentChanges`: one consent change or adoption.
    static let consentChanges = 1
    /// `EventStore.draining`: drains, trims, purges, the census.
    static let drain = 2
    /// A journal stripe's state (`JournalStripe.state`): one `track`.
    static let stripe = 3
    /// `AppNorthEvents.state`: the queue's in-memory state.
    static let eventsState = 4
    /// `SQLiteStore.connection`: the database; nothing is taken inside it.
    static let connection = 5
    /// A `ForkLocal`'s slot: its `make` takes no lock.
    static let forkLocal = 20
    /// The `ForkLocal` slot of `SharedThreads`' count of uses.
    static let sharedThreadUsersSlot = 15
    /// `SharedThreads`: the uses of the shared threads (the engine's and
    /// workers' slots are taken inside it).
    static let sharedThreadUsers = 16
    /// The thread registry's `ForkLocal` slot (taken inside `forkLocal`:
    /// a `make` that starts a thread).
    static let threadRegistrySlot = 21
    /// `LibraryThreads`' list of running threads.
    static let threadRegistry = 22
    /// A `LibraryThread` being started (its new thread waits on it).
    static let threadStart = 23
    /// A `BackgroundThread` being started (its owner's hold while the
    /// thread's `LibraryThread` is made).
    static let threadOwner = 19
    /// A `WorkerPool`'s jobs and counts (starts a thread inside).
    static let workerPool = 17
    /// A `ListenerRegistry`'s listeners and queue (nothing inside; its
    /// callbacks run with it released).
    static let listeners = 28
    /// `OperationTable`: the operations in flight (nothing inside).
    static let operations = 29
    /// A `WakeSignal` or `GenerationWaiter` (nothing inside).
    static let signal = 30
}

enum LockOrder {
    #if DEBUG
    /// The levels the calling thread holds, as bits.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The levels the calling thread holds, as bits (for tests).
    static var held: UInt { UInt(bitPattern: pthread_getspecific(key)) }

    static func willAcquire(_ level: Int) {
        guard level > 0 else { return }
        let held = UInt(bitPattern: pthread_getspecific(key))
        precondition(held >> UInt(level) == 0,
                     "lock order: taking a level-\(level) lock while holding levels \(String(held, radix: 2)) (docs/architecture.md)")
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: held | 1 << UInt(level)))
    }

    static func released(_ level: Int) {
        guard level > 0 else { return }
        let held = UInt(bitPattern: pthread_getspecific(key))
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: held & ~(1 << UInt(level))))
    }
    #else
    static var held: UInt { 0 }
    @inline(__always) static func willAcquire(_ level: Int) {}
    @inline(__always) static func released(_ level: Int) {}
    #endif
}
