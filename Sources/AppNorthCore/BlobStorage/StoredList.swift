/// How one kind of stored list (the offline queue's, the read cache's) is
/// named and turned into a blob and back.
protocol StoredListCodec {
    associatedtype Entry: Sendable
    /// "offline queue", "read cache": in log lines and error messages.
    static var what: String { get }
    static var role: StorageClaims.Role { get }
    static func encode(_ entries: [Entry]) -> [UInt8]
    /// The entries of a blob; damaged ones are dropped and noted in `damage`.
    static func decode(_ bytes: [UInt8], damage: inout StoredDamage) throws(AppNorthError) -> [Entry]
    /// The stored entries as a change on shared storage sees them, given
    /// this process's loaded copy (the cache keeps its own entries'
    /// monotonic times). The default takes the stored ones.
    static func adopt(_ stored: [Entry], loaded: [Entry]) -> [Entry]
    /// Whether a change left the list as it was, so that nothing is saved
    /// to storage that is not shared. The default: never.
    static func unchanged(_ before: [Entry], _ after: [Entry]) -> Bool
}

extension StoredListCodec {
    static func adopt(_ stored: [Entry], loaded: [Entry]) -> [Entry] { stored }
    static func unchanged(_ before: [Entry], _ after: [Entry]) -> Bool { false }
}

/// A list of entries kept as one blob in a queue or cache storage: the
/// offline queue and the read cache are each one of these plus their
/// rules. It claims the storage (one user per instance), loads the list at
/// open, and applies every change in turn (`OperationGate`): on an
/// `AppNorthAtomicBlobStorage` to the stored blob in one transaction, so
/// lists in several handles or processes on one stored blob never drop
/// each other's entries; on any other storage to the loaded copy, saved
/// before memory is updated. An empty list is stored as no blob.
/// Thread-safe.
final class StoredList<Codec: StoredListCodec>: Sendable {
    private let storage: any AnyObject & Sendable
    private let load: @Sendable () throws -> [UInt8]?
    private let save: @Sendable ([UInt8]?) throws -> Void
    /// Set when the storage changes atomically: the stored blob, not
    /// `entries`, is then the truth, re-read inside every change.
    private let shared: (any AppNorthAtomicBlobStorage)?
    /// The loaded entries; always equal to what was last saved or read.
    private let entries: Lock<[Codec.Entry]>
    /// One storage update at a time (the storage may be host code).
    private let gate = OperationGate()
    /// Damaged stored entries dropped: logged, and counted since open.
    private let damage: StoredDamageReporter

    init(storage: any AnyObject & Sendable, load: @escaping @Sendable () throws -> [UInt8]?,
         save: @escaping @Sendable ([UInt8]?) throws -> Void, logger: Logger) throws(AppNorthError) {
        try StorageClaims.claim(storage, as: Codec.role)
        damage = StoredDamageReporter(what: Codec.what, logger: logger)
        var found = StoredDamage()
        do {
            let loaded = try storageCall("loading the \(Codec.what)") { try load() }
            entries = Lock(try loaded.map { bytes throws(AppNorthError) in try Codec.decode(bytes, damage: &found) } ?? [],
                           level: LockClass.storedList)
        } catch {
            StorageClaims.release(storage)
            throw error
        }
        damage.report(found)
        self.storage = storage
        self.load = load
        self.save = save
        shared = storage as? any AppNorthAtomicBlobStorage
    }

    deinit { StorageClaims.release(storage) }

    /// Damaged stored entries found and dropped since this list opened.
    var damagedDropped: Int { damage.dropped.load(ordering: .relaxed) }

    /// The entries as last loaded, saved or re-read by this process.
    var loaded: [Codec.Entry] { entries.withLock { $0 } }

    /// The entries as stored now: re-read from a shared storage (another
    /// handle or process may have changed them), else the loaded copy.
    func current() throws -> [Codec.Entry] {
        guard shared != nil else { return loaded }
        let blob = try storageCall("loading the \(Codec.what)") { try load() }
        var found = StoredDamage()
        let list = try blob.map { bytes throws(AppNorthError) in try Codec.decode(bytes, damage: &found) } ?? []
        damage.report(found)
        entries.withLock { $0 = list }
        return list
    }

    /// Applies `change` to the entries and stores the result. Runs inside
    /// the gate, outside the data lock. An error thrown by `change` stores
    /// nothing and is rethrown as it is.
    @discardableResult
    func modify<R>(_ change: (inout [Codec.Entry]) throws -> R) throws -> R {
        var found = StoredDamage()
        defer { damage.report(found) }  // after the gate and the storage's transaction
        return try gate.run("the \(Codec.what)") {
            if let shared {
                let mine = loaded
                let (list, result) = try storageCall("saving the \(Codec.what)") {
                    try shared.update { blob throws -> (value: [UInt8]?, result: ([Codec.Entry], R)) in
                        found = StoredDamage()  // a retried transaction reads the blob again
                        let stored = try blob.map { bytes throws(AppNorthError) in try Codec.decode(bytes, damage: &found) } ?? []
                        var list = Codec.adopt(stored, loaded: mine)
                        let result = try change(&list)
                        return (list.isEmpty ? nil : Codec.encode(list), (list, result))
                    }
                }
                entries.withLock { $0 = list }
                return result
            }
            let before = loaded
            var list = before
            let result = try change(&list)
            if !Codec.unchanged(before, list) {
                let blob = list.isEmpty ? nil : Codec.encode(list)
                try storageCall("saving the \(Codec.what)") { try save(blob) }
                entries.withLock { $0 = list }
            }
            return result
        }
    }
}

extension LockClass {
    /// `StoredList.entries`: a stored list's entries.
    static let storedList = LockClass.leaf("StoredList.entries")
}
