/// The identity half of the event queue's API: ids and the push token
/// (held by `EventSender`, with the session).
extension AppNorthEvents {
    // MARK: Identity

    package var anonymousID: String { identity.anonymousID }
    package var userID: String? { identity.userID }

    package func identify(userID: String) throws(AppNorthError) {
        guard (1...256).contains(userID.utf8.count) else { throw .invalidArgument("user id must be 1 to 256 bytes") }
        try requireOpen()
        try sender.identify(userID)
    }

    /// Clears the user id and the data directory's super properties
    /// (logout). The anonymous id stays.
    package func reset() throws(AppNorthError) {
        try requireOpen()
        try sender.identify(nil)
        try clearSuperProperties()
    }

    package func setPushToken(_ token: String?) throws(AppNorthError) {
        if let token, !(1...4096).contains(token.utf8.count) { throw .invalidArgument("push token must be 1 to 4096 bytes") }
        try requireOpen()
        try identity.setPushToken(token)
    }

    package func pushToken() throws(AppNorthError) -> String? { try identity.pushToken() }
}
