import AppNorthCore
import Foundation
import Observation

/// The community screen's state: boards and ideas for one client and idea
/// query. `load()` shows fresh cached boards and ideas at once (when a
/// cache is given), then loads both from the network, shows them and
/// stores them in the cache. It is what `AppNorthView` renders; a host
/// without SwiftUI observes it directly (Observation works on Linux too).
///
/// On a network failure the cached arrays (if any) stay shown and `error`
/// is set. Recreate the model when the account changes: it keeps its loaded
/// arrays.
@MainActor
@Observable
public final class AppNorthCommunityModel {
    /// Where the shown arrays came from.
    public enum Source: Sendable, Equatable {
        case none, cache, network
    }

    public let client: AppNorthClient
    public let cache: AppNorthReadCache?
    /// The ideas shown: filters and search (no cursor: first page only).
    public var query: IdeaQuery

    public private(set) var boards: [Board] = []
    public private(set) var ideas: [Idea] = []
    public private(set) var boardsSource: Source = .none
    public private(set) var ideasSource: Source = .none
    public private(set) var isLoading = false
    /// The last load's failure, nil after a load that succeeded.
    public private(set) var error: (any Error)?

    public init(client: AppNorthClient, cache: AppNorthReadCache? = nil, query: IdeaQuery = IdeaQuery()) {
        self.client = client
        self.cache = cache
        self.query = query
    }

    /// Cached-then-fresh: fresh cached arrays first, then the network's.
    /// Cancelling the calling task cancels the request in flight.
    public func load() async {
        isLoading = true
        defer { isLoading = false }
        var query = self.query
        query.cursor = nil
        let scope = client.scope
        if let cache {
            // A cache that fails to load only costs the head start.
            if let cached = try? await cache.boards(scope: scope) {
                boards = cached
                boardsSource = .cache
            }
            if let cached = try? await cache.ideas(scope: scope, query: query) {
                ideas = cached
                ideasSource = .cache
            }
        }
        do {
            let freshBoards = try await client.fetchBoards().boards
            boards = freshBoards
            boardsSource = .network
            let freshIdeas = try await client.fetchIdeas(query).ideas
            ideas = freshIdeas
            ideasSource = .network
            error = nil
            if let cache {
                try? await cache.storeBoards(freshBoards, scope: scope)
                try? await cache.storeIdeas(freshIdeas, scope: scope, query: query)
            }
        } catch {
            self.error = error
        }
    }
}
