/// Feedback: report text, a diagnostics JSON object kept as the host's own
/// text, and screenshots.
public struct AppNorthFeedback: Sendable, Equatable {
    public struct Screenshot: Sendable, Equatable {
        public static let contentTypes: Set<String> = ["image/png", "image/jpeg"]
        public let contentType: String
        public let bytes: [UInt8]
        public init(contentType: String, bytes: [UInt8]) {
            self.contentType = contentType
            self.bytes = bytes
        }
    }

    public static let maxTextCharacters = 20_000
    public static let maxScreenshots = 5
    public static let maxScreenshotBytes = 2 * 1024 * 1024
    /// Diagnostics are a small JSON object, not a log dump: anything bigger
    /// would be queued, stored and re-sent whole on every flush.
    public static let maxDiagnosticsBytes = 256 * 1024

    public var text: String
    public var diagnosticsJSON: String?
    public var screenshots: [Screenshot]

    public init(text: String = "", diagnosticsJSON: String? = nil, screenshots: [Screenshot] = []) {
        self.text = text
        self.diagnosticsJSON = diagnosticsJSON
        self.screenshots = screenshots
    }

    public static func checkText(_ text: String) throws(AppNorthError) {
        try limit(text, "feedback text", max: maxTextCharacters)
    }

    public static func checkDiagnostics(_ json: String) throws(AppNorthError) {
        // Measured before parsing, so an oversize document costs nothing more.
        guard json.utf8.count <= maxDiagnosticsBytes else {
            throw .tooLarge("diagnostics are \(json.utf8.count) bytes; the limit is \(maxDiagnosticsBytes)")
        }
        _ = try JSON.parseObject(json, what: "diagnostics")
    }

    public static func checkScreenshot(_ shot: Screenshot, count: Int) throws(AppNorthError) {
        guard Screenshot.contentTypes.contains(shot.contentType) else {
            throw .invalidArgument("screenshot content type must be image/png or image/jpeg")
        }
        guard !shot.bytes.isEmpty else { throw .invalidArgument("screenshot is empty") }
        guard shot.bytes.count <= maxScreenshotBytes else {
            throw .tooLarge("screenshot is \(shot.bytes.count) bytes; the limit is \(maxScreenshotBytes)")
        }
        guard count < maxScreenshots else { throw .tooLarge("at most \(maxScreenshots) screenshots") }
    }
}

/// A write the offline queue may hold: an idea, a comment or feedback.
/// Votes and chat messages are deliberately absent.
public enum CommunityWrite: Sendable, Equatable {
    case idea(boardID: String, title: String, body: String)
    case comment(ideaID: String, body: String)
    case feedback(AppNorthFeedback)

    public static let maxTitleCharacters = 200
    public static let maxTextCharacters = 10_000

    /// The name stored in queue entries.
    public var kind: String {
        switch self {
        case .idea: return "idea"
        case .comment: return "comment"
        case .feedback: return "feedback"
        }
    }

    /// The API path under /v1/apps/{app}.
    var path: String {
        switch self {
        case .idea: return "/ideas"
        case .comment(let ideaID, _): return "/ideas/\(Text.pathSegment(ideaID))/comments"
        case .feedback: return "/feedback"
        }
    }

    /// Checks content before anything is sent or stored.
    public func validate() throws(AppNorthError) {
        switch self {
        case .idea(let boardID, let title, let body):
            try requireID(boardID, "board_id")
            try requireText(title, "title", max: Self.maxTitleCharacters)
            try limit(body, "body", max: Self.maxTextCharacters)
        case .comment(let ideaID, let body):
            try requireID(ideaID, "idea_id")
            try requireText(body, "comment body", max: Self.maxTextCharacters)
        case .feedback(let feedback):
            try requireText(feedback.text, "feedback text", max: AppNorthFeedback.maxTextCharacters)
            if let diagnostics = feedback.diagnosticsJSON { try AppNorthFeedback.checkDiagnostics(diagnostics) }
            for (index, shot) in feedback.screenshots.enumerated() {
                try AppNorthFeedback.checkScreenshot(shot, count: index)
            }
        }
    }

    /// The JSON request body. Diagnostics are spliced in as the host's own
    /// text, so numbers keep their exact spelling.
    func requestBody() -> [UInt8] {
        let object = JSON.object()
        switch self {
        case .idea(let boardID, let title, let body):
            object.set("board_id", .string(boardID))
            object.set("title", .string(title))
            object.set("body", .string(body))
            return Array(object.serialized().utf8)
        case .comment(_, let body):
            object.set("body", .string(body))
            return Array(object.serialized().utf8)
        case .feedback(let feedback):
            object.set("text", .string(feedback.text))
            let shots = JSON.array()
            for shot in feedback.screenshots {
                let item = JSON.object()
                item.set("content_type", .string(shot.contentType))
                item.set("data_base64", .string(Base64.encode(shot.bytes)))
                shots.append(item)
            }
            object.set("screenshots", shots)
            var text = object.serialized()
            text.removeLast() // the closing brace
            text += ",\"diagnostics\":" + (feedback.diagnosticsJSON ?? "{}") + "}"
            return Array(text.utf8)
        }
    }
}

/// An id that goes into a URL path (Text.pathSegment): 1 to 256 bytes and
/// not a dot segment, which curl would resolve ("..": the parent path).
func requireID(_ value: String, _ name: String) throws(AppNorthError) {
    guard !value.isEmpty, value.utf8.count <= 256 else { throw .invalidArgument("\(name) must be 1 to 256 bytes") }
    guard value != "." && value != ".." else { throw .invalidArgument("\(name) must not be \".\" or \"..\"") }
}

func requireText(_ value: String, _ name: String, max: Int) throws(AppNorthError) {
    guard !Text.trimmed(value).isEmpty else { throw .validation("\(name) is empty", httpStatus: 0) }
    try limit(value, name, max: max)
}

func limit(_ value: String, _ name: String, max: Int) throws(AppNorthError) {
    // A scalar is 1 to 4 UTF-8 bytes: most texts pass without counting,
    // and a huge one is refused without walking it.
    let bytes = value.utf8.count
    guard bytes > max else { return }
    guard bytes / 4 <= max else { throw .tooLarge("\(name) is over \(max) characters (\(bytes) bytes)") }
    let count = value.unicodeScalars.count
    guard count <= max else { throw .tooLarge("\(name) is \(count) characters; the limit is \(max)") }
}

/// Validates a caller's idempotency key, or makes one.
func idempotencyKey(_ key: String?) throws(AppNorthError) -> String {
    guard let key else { return Random.hexToken(bytes: 16) }
    // Printable ASCII (0x20 to 0x7E), as the protocol allows; HTTP would
    // trim spaces at either end, so those are refused.
    guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }),
          key.utf8.first != 0x20, key.utf8.last != 0x20 else {
        throw .invalidArgument("idempotency key must be 1 to 255 printable ASCII characters, not starting or ending with a space")
    }
    return key
}

extension CommunityWrite {
    /// The checks a submit makes before anything is sent or queued (the
    /// content, the caller's key); returns the key to use (the caller's,
    /// or a new one). For the non-blocking queue submit, which fails its
    /// start on bad input.
    public func checkedForSubmit(idempotencyKey key: String?) throws(AppNorthError) -> String {
        try validate()
        return try idempotencyKey(key)
    }
}
