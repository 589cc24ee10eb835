/// Filters and paging for listing ideas. Part of every idea cache key.
public struct IdeaQuery: Sendable, Equatable {
    public static let statuses: Set<String> = ["open", "planned", "in_progress", "done", "declined"]

    public var board: String?
    /// Case-insensitive search in title and body.
    public var search: String?
    public var status: String?
    public var cursor: String?
    /// 1 to 100; nil leaves the server's default (20).
    public var limit: Int?

    public init(board: String? = nil, search: String? = nil, status: String? = nil,
                cursor: String? = nil, limit: Int? = nil) {
        self.board = board
        self.search = search
        self.status = status
        self.cursor = cursor
        self.limit = limit
    }

    /// Parses the C API's query object: {"board","q","status","cursor","limit"}.
    /// Unknown keys and wrong types are refused, so a typo never silently
    /// widens a query.
    public init(json text: String?) throws(AppNorthError) {
        self.init()
        guard let text else { return }
        let object = try JSON.parseObject(text, what: "idea query")
        for (key, value) in object.objectMembers {
            func string() throws(AppNorthError) -> String {
                guard let s = value.stringValue else { throw .invalidJSON("idea query \"\(key)\" must be a string", position: 0) }
                return s
            }
            switch key {
            case "board": board = try string()
            case "q": search = try string()
            case "status": status = try string()
            case "cursor": cursor = try string()
            case "limit":
                guard let n = value.intValue else { throw .invalidJSON("idea query \"limit\" must be an integer", position: 0) }
                limit = Int(n)
            default:
                throw .invalidJSON("idea query has unknown key \"\(key)\" (allowed: board, q, status, cursor, limit)", position: 0)
            }
        }
        try validate()
    }

    public func validate() throws(AppNorthError) {
        if let status, !Self.statuses.contains(status) {
            throw .invalidArgument("idea status must be one of open, planned, in_progress, done, declined")
        }
        if let limit, !(1...100).contains(limit) {
            throw .invalidArgument("idea limit must be 1 to 100")
        }
    }

    /// The URL query string, "?board=...&q=..." or "".
    var queryString: String {
        var parts: [String] = []
        if let board { parts.append("board=" + Text.percentEncoded(board)) }
        if let search { parts.append("q=" + Text.percentEncoded(search)) }
        if let status { parts.append("status=" + Text.percentEncoded(status)) }
        if let cursor { parts.append("cursor=" + Text.percentEncoded(cursor)) }
        if let limit { parts.append("limit=\(limit)") }
        return parts.isEmpty ? "" : "?" + parts.joined(separator: "&")
    }

    /// A stable text form of every filter, for cache keys.
    public var cacheKey: String {
        let fields: [(String, String?)] = [("board", board), ("q", search), ("status", status), ("limit", limit.map { String($0) })]
        return fields.map { "\($0.0)=\($0.1.map(Text.percentEncoded) ?? "-")" }.joined(separator: "&")
    }
}
