
/// The analytics identity: an anonymous id made on first use and kept, the
/// user id set by `identify` and cleared by `reset`, and a push token.
/// Values are cached in memory so that tracking never reads the store.
final class Identity: Sendable {
    static let anonymousKey = "anonymous_id"
    static let userKey = "user_id"
    static let pushTokenKey = "push_token"

    private let store: any AppNorthSecureStore
    private let cached: Lock<(anonymousID: String, userID: String?)>

    /// Damaged stored values (never logged: they are identity values) are
    /// replaced: a new anonymous id, no user id.
    init(store: any AppNorthSecureStore, clock: any AppNorthClock, logger: Logger = .silent) throws(AppNorthError) {
        self.store = store
        if (store as? FileSecureStore)?.wasDamaged == true {
            logger.log(.warning, "identity: the identity file was damaged; its unreadable values were dropped")
        }
        if let stored = try storageCall("reading the anonymous id", { try store.read(Self.anonymousKey) }),
           !Self.isSoundAnonymousID(stored) {
            logger.log(.warning, "identity: dropped a damaged anonymous id; a new one is made")
        }
        // One step in the store, so that processes opening one data
        // directory at once all keep the first id made.
        let anonymousID = try storageCall("reading the anonymous id") {
            try store.readOrCreate(Self.anonymousKey, accept: Self.isSoundAnonymousID) {
                Random.uuidV7(unixMilliseconds: clock.wallMilliseconds())
            }
        }
        var user = try storageCall("reading the user id") { try store.read(Self.userKey) }
        if let stored = user, !Self.isSoundUserID(stored) {
            logger.log(.warning, "identity: dropped a damaged user id")
            try storageCall("removing the damaged user id") { try store.write(Self.userKey, nil) }
            user = nil
        }
        cached = Lock((anonymousID, user), level: LockClass.identityCache)
    }

    /// 1 to 256 bytes without control characters: it goes into every event.
    static func isSoundAnonymousID(_ value: String) -> Bool {
        (1...256).contains(value.utf8.count) && !value.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// What `identify` accepts: 1 to 256 bytes, no NUL.
    static func isSoundUserID(_ value: String) -> Bool {
        (1...256).contains(value.utf8.count) && !value.utf8.contains(0)
    }

    var anonymousID: String { cached.withLock { $0.anonymousID } }
    var userID: String? { cached.withLock { $0.userID } }
    var both: (anonymousID: String, userID: String?) { cached.withLock { $0 } }

    func identify(_ userID: String?) throws(AppNorthError) {
        try storageCall("storing the user id") { try store.write(Self.userKey, userID) }
        cached.withLock { $0.userID = userID }
    }

    func setPushToken(_ token: String?) throws(AppNorthError) {
        try storageCall("storing the push token") { try store.write(Self.pushTokenKey, token) }
    }

    func pushToken() throws(AppNorthError) -> String? {
        try storageCall("reading the push token") { try store.read(Self.pushTokenKey) }
    }
}

extension LockClass {
    /// `Identity.cached`: the anonymous and user ids read last (read inside
    /// `EventSender.current`: a rebuild of the identity tail reads the ids
    /// under the sender's lock, so the later of two rebuilds wins).
    static let identityCache = LockClass.leaf("Identity.cached", takenInside: ["EventSender.current"])
}
