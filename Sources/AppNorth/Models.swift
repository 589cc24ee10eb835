import AppNorthCore
import Foundation

// Typed community data, decoded from the exact JSON the core returns (the
// API's own objects, snake_case keys, times as Unix milliseconds) and
// encoded back to it, which is also the form the read cache stores.

/// A board: a group of ideas.
public struct Board: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var name: String
    public var description: String
    /// Unix milliseconds.
    public var createdAtMilliseconds: Int64

    public init(id: String, name: String, description: String = "", createdAtMilliseconds: Int64 = 0) {
        self.id = id
        self.name = name
        self.description = description
        self.createdAtMilliseconds = createdAtMilliseconds
    }

    public var createdAt: Date { Date(unixMilliseconds: createdAtMilliseconds) }

    enum CodingKeys: String, CodingKey {
        case id, name, description
        case createdAtMilliseconds = "created_at"
    }
}

/// An idea on a board.
public struct Idea: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var boardID: String
    public var title: String
    public var body: String
    /// open, planned, in_progress, done or declined (kept as sent, so a
    /// status added by a newer server still decodes).
    public var status: String
    public var votes: Int
    public var commentCount: Int
    /// The author's lowercased email, or "anonymous".
    public var author: String
    /// Unix milliseconds.
    public var createdAtMilliseconds: Int64

    public init(id: String, boardID: String, title: String, body: String = "", status: String = "open",
                votes: Int = 0, commentCount: Int = 0, author: String = "anonymous", createdAtMilliseconds: Int64 = 0) {
        self.id = id
        self.boardID = boardID
        self.title = title
        self.body = body
        self.status = status
        self.votes = votes
        self.commentCount = commentCount
        self.author = author
        self.createdAtMilliseconds = createdAtMilliseconds
    }

    public var createdAt: Date { Date(unixMilliseconds: createdAtMilliseconds) }

    enum CodingKeys: String, CodingKey {
        case id, title, body, status, votes, author
        case boardID = "board_id"
        case commentCount = "comment_count"
        case createdAtMilliseconds = "created_at"
    }
}

/// A comment on an idea.
public struct Comment: Codable, Sendable, Hashable, Identifiable {
    public var id: String
    public var ideaID: String
    public var body: String
    public var author: String
    /// Unix milliseconds.
    public var createdAtMilliseconds: Int64

    public init(id: String, ideaID: String, body: String, author: String = "anonymous", createdAtMilliseconds: Int64 = 0) {
        self.id = id
        self.ideaID = ideaID
        self.body = body
        self.author = author
        self.createdAtMilliseconds = createdAtMilliseconds
    }

    public var createdAt: Date { Date(unixMilliseconds: createdAtMilliseconds) }

    enum CodingKeys: String, CodingKey {
        case id, body, author
        case ideaID = "idea_id"
        case createdAtMilliseconds = "created_at"
    }
}

/// `GET /boards`: every board of the app.
public struct BoardsPage: Codable, Sendable, Hashable {
    public var boards: [Board]
    public init(boards: [Board]) { self.boards = boards }
}

/// `GET /ideas`: one page of ideas; `nextCursor` asks for the next one
/// (`IdeaQuery.cursor`), nil on the last page.
public struct IdeasPage: Codable, Sendable, Hashable {
    public var ideas: [Idea]
    public var nextCursor: String?

    public init(ideas: [Idea], nextCursor: String? = nil) {
        self.ideas = ideas
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case ideas
        case nextCursor = "next_cursor"
    }
}

/// `GET /ideas/{id}/comments`: an idea's comments, oldest first.
public struct CommentsPage: Codable, Sendable, Hashable {
    public var comments: [Comment]
    public init(comments: [Comment]) { self.comments = comments }
}

extension Date {
    init(unixMilliseconds: Int64) {
        self.init(timeIntervalSince1970: TimeInterval(unixMilliseconds) / 1000)
    }
}

/// Decodes the core's JSON text. A shape the models do not match is
/// `AppNorthError.invalidJSON`, the core's error for a malformed response.
enum ModelCoding {
    static func decode<T: Decodable>(_ type: T.Type, from text: String, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(text.utf8))
        } catch {
            throw AppNorthError.invalidJSON("\(what) does not match \(T.self): \(error)", position: -1)
        }
    }

    static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
