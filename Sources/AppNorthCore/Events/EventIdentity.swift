/// The identity half of the event queue: ids and the push token.
extension AppNorthEvents {
    // MARK: Identity

    package var anonymousID: String { identity.anonymousID }
    package var userID: String? { identity.userID }

    package func identify(userID: String) throws(AppNorthError) {
        guard (1...256).contains(userID.utf8.count) else { throw .invalidArgument("user id must be 1 to 256 bytes") }
        try whileOpen { _ in }
        try identity.identify(userID)
        refreshEventTail()
    }

    /// Clears the user id (logout). The anonymous id stays.
    package func reset() throws(AppNorthError) {
        try whileOpen { _ in }
        try identity.identify(nil)
        refreshEventTail()
    }

    /// Rebuilds the events' identity tail from the identity now held. The
    /// identity is read under the state lock, so that of two racing
    /// identify calls the later rebuild sees the later value.
    func refreshEventTail() {
        state.withLock {
            $0.eventTail = eventTail(sessionID: $0.sessionID)
            tailGeneration.add(1, ordering: .releasing)
        }
    }

    func eventTail(sessionID: String) -> [UInt8] {
        let who = identity.both
        return EventPayload.identityTail(anonymousID: who.anonymousID, userID: who.userID, sessionID: sessionID)
    }

    package func setPushToken(_ token: String?) throws(AppNorthError) {
        if let token, !(1...4096).contains(token.utf8.count) { throw .invalidArgument("push token must be 1 to 4096 bytes") }
        try whileOpen { _ in }
        try identity.setPushToken(token)
    }

    package func pushToken() throws(AppNorthError) -> String? { try identity.pushToken() }
}
