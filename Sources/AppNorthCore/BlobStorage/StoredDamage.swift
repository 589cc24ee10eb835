import Synchronization

/// What a stored queue or cache blob held that could not be read and was
/// dropped, collected while decoding (often inside a storage transaction)
/// and reported after it: log lines never go out under a lock.
struct StoredDamage {
    /// Entries dropped.
    var entries = 0
    /// What identifies them, where readable (entry ids, kinds): never
    /// bodies, scopes or other account data.
    var names: [String] = []
    /// Set when the whole blob was dropped (unreadable, a newer version).
    var wholeBlob: String?

    var isEmpty: Bool { entries == 0 && wholeBlob == nil }

    mutating func drop(_ name: String?) {
        entries += 1
        if let name, names.count < 5 { names.append(name) }
    }
}

/// Logs a queue's or cache's damage once per distinct finding (a blob that
/// is read again before it is rewritten would repeat it) and counts the
/// entries dropped since the handle opened.
final class StoredDamageReporter: Sendable {
    private let what: String
    private let logger: Logger
    private let lastReport = Lock<String?>(nil, level: LockClass.storedDamage)
    /// Entries (or whole blobs) dropped since open, counting each finding once.
    let dropped = Atomic<Int>(0)

    init(what: String, logger: Logger) {
        self.what = what
        self.logger = logger
    }

    func report(_ damage: StoredDamage) {
        guard !damage.isEmpty else { return }
        var message = "\(what): "
        if let whole = damage.wholeBlob {
            message += "dropped the stored \(what): \(whole)"
        } else {
            message += "dropped \(damage.entries) damaged stored entr\(damage.entries == 1 ? "y" : "ies")"
            if !damage.names.isEmpty {
                message += " (" + damage.names.joined(separator: ", ") + (damage.entries > damage.names.count ? ", ..." : "") + ")"
            }
        }
        let isNew = lastReport.withLock { last -> Bool in
            guard last != message else { return false }
            last = message
            return true
        }
        guard isNew else { return }
        dropped.add(max(1, damage.entries), ordering: .relaxed)
        logger.log(.warning, message)
    }
}

extension LockClass {
    /// `StoredDamage.lastReport`: the last damage reported.
    static let storedDamage = LockClass.leaf("StoredDamage.lastReport")
}
