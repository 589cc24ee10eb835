/// Cached-then-fresh reads: the counterpart of the seed's
/// `AppNorthView(client:cache:)` for hosts without SwiftUI.
extension AppNorthReadCache {
    package enum Source: Int32, Sendable { case cache = 1, network = 2 }

    /// Delivers fresh cached boards at once (if any), then loads them from
    /// the network, stores them and delivers them again. Both deliveries run
    /// on the calling thread, with no lock held. A network failure is
    /// thrown after any cached data has been delivered.
    package func readBoards(using client: AppNorthClient, deliver: (Source, String) -> Void) throws {
        if let cached = boards(scope: client.scope) { deliver(.cache, cached) }
        let response = try client.listBoards()
        try storeBoards(response, scope: client.scope)
        deliver(.network, try Self.array(from: response, member: "boards"))
    }

    /// The same for ideas and a query (no cursor).
    package func readIdeas(using client: AppNorthClient, query: IdeaQuery = IdeaQuery(),
                          deliver: (Source, String) -> Void) throws {
        guard query.cursor == nil else {
            throw AppNorthError.invalidArgument("cached reads load first pages only: remove the cursor from the query")
        }
        if let cached = ideas(scope: client.scope, query: query) { deliver(.cache, cached) }
        let response = try client.listIdeas(query)
        try storeIdeas(response, scope: client.scope, query: query)
        deliver(.network, try Self.array(from: response, member: "ideas"))
    }
}
