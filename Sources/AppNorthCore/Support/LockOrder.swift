import Glibc

/// The order in which the library's locks nest (docs/architecture.md,
/// "Locks, threads and per-process objects"), checked by `LockOrder`: a
/// thread may take a lock only if it holds none of the same or a later
/// level. Every lock has one (`Lock.init` asks for it). Level 0 belongs
/// to the one lock that host code runs inside, `OperationGate`, and is the
/// only level not checked (scripts/check-toolkit.py refuses it elsewhere).
/// Levels 40 and up are leaves: data locks that take no other lock inside
/// except a later leaf (the logger's queue, the clocks, the random pool).
package enum LockLevel {
    /// An `OperationGate`: a queue's or cache's turn, held while its host
    /// storage callbacks run (they may call the library, any handle's, so
    /// every lock nests inside it, another gate too: not checked).
    static let gate = 0
    /// `EventConsent.changes`: one consent change or adoption.
    static let consentChanges = 1
    /// `EventImporter.state`: the drain's turn (drains, trims, purges, the census).
    static let drain = 2
    /// A journal stripe's state (`JournalStripe.state`): one `track`.
    static let stripe = 3
    /// `EventUploader.state`: the uploader's breaker, flushes and errors.
    static let uploaderState = 4
    /// `SQLiteStore.connection`: the database; only leaves inside it.
    static let connection = 12
    /// `RuntimeWarmUp.done`: a process's first client makes the start
    /// path's runtime first-uses (ForkLocal slots and tables inside it).
    static let runtimeWarmUp = 14
    /// `EventConsent.state`: the consent gate and the request a revocation
    /// cancels (taken inside `consentChanges`; nothing inside but a cancel).
    static let consentState = 6
    /// `IdentityWriters.lock`: the process's turn for identity file
    /// changes (the record lock on the file is taken inside it).
    static let identityWriters = 7
    /// `ConfigEngine.state`: a config handle's resolved values and its
    /// worker's schedule.
    static let configState = 8
    /// `ConfigCache.saved`: the last saved config record's stamp (the
    /// config database is written inside it).
    static let configCacheSaved = 10
    /// `TransferEngine.drive`: curl's multi handle and the engine's
    /// transfers (taken by the engine thread for a turn; callers only try it).
    static let transferEngine = 25
    /// `TransferEngine.inbox`: what callers leave for a busy engine (nothing inside).
    static let transferInbox = 26
    /// A `ForkLocal`'s slot: its `make` takes no lock.
    static let forkLocal = 20
    /// The `ForkLocal` slot of `SharedThreads`' holders.
    static let sharedThreadUsersSlot = 15
    /// `SharedThreads`: the handles holding the shared threads (the
    /// engine's and workers' slots are taken inside it).
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
    /// A `WakeSignal` or `GenerationWaiter`, or the waits at the C layer's
    /// callback gate (`LibraryGate`) (nothing inside).
    package static let signal = 30

    /// `EventSettingsFeed.state`: a client's latest `appnorth.events` value
    /// and its followers (posted inside `ConfigEngine.state`; nothing inside).
    static let eventSettingsFeed = 35
    /// `EventSettingsOwner.state`: an events handle's applied settings (nothing inside).
    static let eventSettings = 36

    /// `QueueLimits.scans`: the other journal files as last counted
    /// (taken in the drain's turn with the connection held; nothing inside).
    static let foreignScans = 39

    // Leaves.
    /// `EventUploader.worker`: the upload thread's handle.
    static let eventsWorker = 40
    /// `EventCounters.counts`: the queue's counters.
    static let eventCounters = 41
    /// `EventSender.current`: the session and identity events are sent with.
    static let eventSender = 42
    /// `OrphanRecovery.lastScan`: when ended processes' journals were last looked for.
    static let orphanScan = 43
    /// `ConfigCacheClaims.keys`: the config caches claimed in this process.
    static let configClaims = 44
    /// `Identity.cached`: the anonymous and user ids read last.
    static let identityCache = 45
    /// `MemorySecureStore.values`: an in-memory secure store.
    static let memorySecureStore = 46
    /// `ThreadOwners.entries`: the handles `appnorth_shutdown` stops.
    static let threadOwners = 47
    /// `TransferEngine.startFailed`: whether its thread failed to start.
    static let transferStart = 48
    /// `CancellationToken.running`: the transfer a token wakes.
    static let cancellation = 49
    /// `InFlightTransfers.running`: the transfers a handle's free wakes.
    static let inFlightTransfers = 50
    /// `HTTPTransport.pool`: the idle blocking transfer slots.
    static let transportPool = 51
    /// `StoredList.entries`: a stored list's entries.
    static let storedList = 52
    /// `MemoryStorage.data`: an in-memory storage's bytes.
    static let blobData = 53
    /// `StorageClaims.roles`: the storages claimed in this process.
    static let storageClaims = 54
    /// `StoredDamage.lastReport`: the last damage reported.
    static let storedDamage = 55
    /// `QueueLimits.listing`: the journal files listed last.
    static let journalListing = 56
    /// `CurlFeatures.easyInit`: one curl_easy_init at a time, none across
    /// fork() (also its `ForkLocal` slot's level: never nested).
    static let curlEasyInit = 57
    /// `StorageBox.logger`: the logger of a C storage's queues and caches.
    package static let storageLogger = 58
    /// `CallbackDispatcher.state`: dispatch mode's queues (a log line written under any lock above lands here).
    static let dispatcher = 59
    /// `Random.pool`: the random pool.
    static let randomPool = 60
    /// `Random.fallbackState`: the generator used when getrandom fails.
    static let randomFallback = 61
    /// `ManualClock.state`: a test clock's time.
    static let manualClock = 62
    /// A test's own lock (swift tests only: lines a log sink collected, a
    /// test's condition): a leaf, last of all.
    static let test = 63
}

extension LockLevel {
    /// The lock of each level, for a violation's message.
    static func name(_ level: Int) -> String {
        switch level {
        case consentChanges: "EventConsent.changes"
        case drain: "EventImporter.state"
        case stripe: "JournalStripe.state"
        case uploaderState: "EventUploader.state"
        case connection: "SQLiteStore.connection"
        case runtimeWarmUp: "RuntimeWarmUp.done"
        case consentState: "EventConsent.state"
        case sharedThreadUsersSlot: "SharedThreads slot"
        case sharedThreadUsers: "SharedThreads"
        case workerPool: "WorkerPool"
        case threadOwner: "BackgroundThread start"
        case forkLocal: "a ForkLocal slot"
        case threadRegistrySlot: "LibraryThreads slot"
        case threadRegistry: "LibraryThreads"
        case threadStart: "LibraryThread start"
        case listeners: "ListenerRegistry"
        case operations: "OperationTable"
        case signal: "WakeSignal/GenerationWaiter/LibraryGate waits"
        case transferEngine: "TransferEngine.drive"
        case transferInbox: "TransferEngine.inbox"
        case identityWriters: "IdentityWriters.lock"
        case configState: "ConfigEngine.state"
        case configCacheSaved: "ConfigCache.saved"
        case eventSettingsFeed: "EventSettingsFeed.state"
        case eventSettings: "EventSettingsOwner.state"
        default: leafName(level)
        }
    }

    private static func leafName(_ level: Int) -> String {
        switch level {
        case eventsWorker: "EventUploader.worker"
        case eventCounters: "EventCounters.counts"
        case eventSender: "EventSender.current"
        case orphanScan: "OrphanRecovery.lastScan"
        case configClaims: "ConfigCacheClaims.keys"
        case identityCache: "Identity.cached"
        case memorySecureStore: "MemorySecureStore.values"
        case threadOwners: "ThreadOwners.entries"
        case transferStart: "TransferEngine.startFailed"
        case cancellation: "CancellationToken.running"
        case inFlightTransfers: "InFlightTransfers.running"
        case transportPool: "HTTPTransport.pool"
        case storedList: "StoredList.entries"
        case blobData: "MemoryStorage.data"
        case storageClaims: "StorageClaims.roles"
        case storedDamage: "StoredDamage.lastReport"
        case journalListing: "QueueLimits.listing"
        case foreignScans: "QueueLimits.scans"
        case storageLogger: "StorageBox.logger"
        case dispatcher: "CallbackDispatcher.state"
        case randomPool: "Random.pool"
        case randomFallback: "Random.fallbackState"
        case manualClock: "ManualClock.state"
        case test: "a test's lock"
        default: "level \(level)"
        }
    }
}

/// The lock order check: a thread may take a lock only if it holds none of
/// the same or a later level (level 0: unordered, not checked). On in
/// debug builds (swift test), and in any build run with
/// APPNORTH_LOCK_ORDER=1 in the environment: `make test` sets it for the C
/// tests, pytest and the fleet, so the release library they load checks
/// every acquisition. A violation writes both locks' names to stderr and
/// aborts. The levels a thread holds are one pthread key's value; unchecked,
/// an acquisition costs one load of `checked`.
enum LockOrder {
    static let checked: Bool = {
        #if DEBUG
        return true
        #else
        guard let value = getenv("APPNORTH_LOCK_ORDER") else { return false }
        return value.pointee == UInt8(ascii: "1")
        #endif
    }()

    /// The levels the calling thread holds, as bits.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The levels the calling thread holds, as bits (for tests).
    static var held: UInt { checked ? UInt(bitPattern: pthread_getspecific(key)) : 0 }

    @inline(__always)
    static func willAcquire(_ level: Int) {
        guard level > 0 && checked else { return }
        let held = UInt(bitPattern: pthread_getspecific(key))
        if held >> UInt(level) != 0 { violation(level, held) }
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: held | 1 << UInt(level)))
    }

    /// A try that got the lock: held from now on, not checked (a try
    /// never waits, so it cannot close a cycle).
    @inline(__always)
    static func acquiredByTry(_ level: Int) {
        guard level > 0 && checked else { return }
        let held = UInt(bitPattern: pthread_getspecific(key))
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: held | 1 << UInt(level)))
    }

    @inline(__always)
    static func released(_ level: Int) {
        guard level > 0 && checked else { return }
        let held = UInt(bitPattern: pthread_getspecific(key))
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: held & ~(1 << UInt(level))))
    }

    private static func violation(_ level: Int, _ held: UInt) -> Never {
        _ = violationMessage(level, held: held).withCString { write(2, $0, strlen($0)) }
        abort()
    }

    /// What a violation writes: both locks by name (the held one: the
    /// highest level held).
    static func violationMessage(_ level: Int, held: UInt) -> String {
        let highest = held == 0 ? 0 : UInt.bitWidth - 1 - held.leadingZeroBitCount
        return "appnorth: lock order violated: taking \(LockLevel.name(level)) (level \(level)) while holding "
            + "\(LockLevel.name(highest)) (level \(highest)); docs/architecture.md, \"Locks, threads and per-process objects\"\n"
    }
}
