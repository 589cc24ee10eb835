
/// The analytics identity: an anonymous id made on first use and kept, the
/// user id set by `identify` and cleared by `reset`, and a push token.
/// Values are cached in memory so that tracking never reads the store.
final class Identity: Sendable {
    static let anonymousKey = "anonymous_id"
    static let userKey = "user_id"
    static let pushTokenKey = "push_token"

    private let store: any AppNorthSecureStore
    private let cached: Lock<(anonymousID: String, userID: String?)>

    init(store: any AppNorthSecureStore, clock: any AppNorthClock) throws(AppNorthError) {
        self.store = store
        let anonymous = try storageCall("reading the anonymous id") {
            try store.readOrCreate(Self.anonymousKey) { Random.uuidV7(unixMilliseconds: clock.wallMilliseconds()) }
        }
        let user = try storageCall("reading the user id") { try store.read(Self.userKey) }
        cached = Lock((anonymous, user))
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
