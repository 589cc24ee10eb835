import AppNorthCore
import Foundation

/// Typed async reads for Swift hosts. Each runs the core's blocking call on
/// the library's threads; cancelling the task cancels the request in
/// flight (see `BlockingCall`).
extension AppNorthClient {
    /// The app's boards.
    public func fetchBoards() async throws -> BoardsPage {
        let text = try await BlockingCall.run(cancelling: self) { try self.listBoards() }
        return try ModelCoding.decode(BoardsPage.self, from: text, what: "the boards response")
    }

    /// One page of ideas for a query.
    public func fetchIdeas(_ query: IdeaQuery = IdeaQuery()) async throws -> IdeasPage {
        let text = try await BlockingCall.run(cancelling: self) { try self.listIdeas(query) }
        return try ModelCoding.decode(IdeasPage.self, from: text, what: "the ideas response")
    }

    /// An idea's comments.
    public func fetchComments(ideaID: String) async throws -> CommentsPage {
        let text = try await BlockingCall.run(cancelling: self) { try self.listComments(ideaID: ideaID) }
        return try ModelCoding.decode(CommentsPage.self, from: text, what: "the comments response")
    }
}
