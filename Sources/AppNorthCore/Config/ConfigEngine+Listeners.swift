/// A config's listeners and logger, and how dispatch mode routes them.
extension ConfigEngine {
    /// The config's logger: its own, or the client's. On a dispatch-mode
    /// client its own goes through the client's dispatcher too (the
    /// client's already does).
    static func logger(_ own: Logger?, of client: AppNorthClient) -> Logger {
        guard let own else { return client.configuration.logger }
        return client.dispatcher.map { own.routed(through: $0) } ?? own
    }

    /// Listeners delivered on the posting thread, or, on a dispatch-mode
    /// client, by the host's dispatch with changes coalesced.
    static func listenerRegistry(of client: AppNorthClient) -> ListenerRegistry<ConfigChange> {
        ListenerRegistry(dispatcher: client.dispatcher, merge: ConfigChange.merged)
    }

    /// Status listeners, routed like the config listeners; in dispatch
    /// mode the statuses posted between two dispatches come as the latest.
    static func statusListenerRegistry(of client: AppNorthClient) -> ListenerRegistry<ConfigStatus> {
        ListenerRegistry(dispatcher: client.dispatcher, merge: { _, later in later })
    }

    func addStatusListener(_ listener: @escaping @Sendable (ConfigStatus) -> Void) throws(AppNorthError) -> Int64 {
        guard let token = statusListeners.add(listener) else { throw .wrongState("the config is closed") }
        return token
    }

    func removeStatusListener(_ token: Int64) throws(AppNorthError) {
        guard statusListeners.remove(token) else { throw .invalidArgument("no status listener has token \(token)") }
    }

    func addListener(_ listener: @escaping @Sendable (ConfigChange) -> Void) throws(AppNorthError) -> Int64 {
        guard let token = listeners.add(listener) else { throw .wrongState("the config is closed") }
        return token
    }

    func removeListener(_ token: Int64) throws(AppNorthError) {
        guard listeners.remove(token) else { throw .invalidArgument("no listener has token \(token)") }
    }
}
