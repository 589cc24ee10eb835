/// A user's credential. The email is the identity: it is lowercased for
/// account scoping. The token is kept in memory only and never logged or
/// stored.
public struct AppNorthCredential: Sendable, Equatable {
    public let email: String
    public let token: String

    public init(email: String, token: String) {
        self.email = email
        self.token = token
    }

    /// What scopes queued writes and cache keys: the lowercased email.
    public var identity: String { Text.asciiLowercased(email) }
}

/// Everything a client needs to talk to one API as one app and identity.
public struct AppNorthClientConfiguration: Sendable {
    public var apiURL: String
    public var appID: String
    public var credential: AppNorthCredential?
    public var timeouts: HTTPTimeouts
    public var logger: Logger
    /// CA bundle, key pins and proxy; curl's defaults when left empty.
    public var trust: HTTPTrust
    /// Send event batches, and writes from 1 KiB up, gzip-compressed
    /// (`UploadCompression`). On by default; a server that answers 415 to
    /// gzip turns it off for the client by itself.
    public var compressUploads = true

    /// Checks the URL and App ID; the URL loses any trailing slash. A
    /// credential on an http:// URL is refused unless the host is loopback
    /// or named in `allowCleartextHosts` (Cleartext).
    public init(apiURL: String, appID: String, credential: AppNorthCredential? = nil,
                timeouts: HTTPTimeouts = .default, logger: Logger = .silent,
                trust: HTTPTrust = HTTPTrust(), allowCleartextHosts: [String] = []) throws(AppNorthError) {
        self.apiURL = try Self.validatedURL(apiURL)
        self.appID = try Self.validatedAppID(appID)
        if let credential {
            try Self.validateCredential(email: credential.email, token: credential.token)
            try Cleartext.check(url: self.apiURL, allowed: allowCleartextHosts, logger: logger)
        }
        self.credential = credential
        self.timeouts = timeouts
        self.logger = logger
        self.trust = trust
    }

    /// "<api url>|<app id>|<lowercased email or anonymous>": what queue
    /// replay and cache keys match on.
    public var scope: String {
        "\(apiURL)|\(appID)|\(credential?.identity ?? "anonymous")"
    }

    // MARK: Validation, shared with the C options setters

    /// The longest API URL accepted: it prefixes every request URL and
    /// every stored scope.
    public static let maxURLBytes = 2048

    public static func validatedURL(_ url: String) throws(AppNorthError) -> String {
        guard url.utf8.count <= maxURLBytes else {
            throw .tooLarge("API URL is \(url.utf8.count) bytes; the limit is \(maxURLBytes)")
        }
        var url = String(Text.trimmed(url))
        let lower = Text.asciiLowercased(url)
        let schemeLength: Int
        if lower.hasPrefix("https://") {
            schemeLength = 8
        } else if lower.hasPrefix("http://") {
            schemeLength = 7
        } else {
            throw .invalidArgument("API URL must start with http:// or https://")
        }
        while url.count > schemeLength && url.hasSuffix("/") { url.removeLast() }
        let rest = url.dropFirst(schemeLength)
        let host = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard !host.isEmpty, !host.hasPrefix(":"), !host.hasSuffix(":") else {
            throw .invalidArgument("API URL has no host")
        }
        for byte in url.utf8 where byte <= 0x20 || byte >= 0x7F || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
            _ = byte
            throw .invalidArgument("API URL must be plain ASCII without spaces, query or fragment")
        }
        return url
    }

    public static func validatedAppID(_ id: String) throws(AppNorthError) -> String {
        guard (1...128).contains(id.utf8.count) else {
            throw .invalidArgument("App ID must be 1 to 128 characters")
        }
        // A dot segment would be removed from the URL path by curl.
        guard id != "." && id != ".." else { throw .invalidArgument("App ID must not be \".\" or \"..\"") }
        for byte in id.utf8 {
            let ok = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            guard ok else { throw .invalidArgument("App ID may only hold A-Z a-z 0-9 . _ -") }
        }
        return id
    }

    public static func validateCredential(email: String, token: String) throws(AppNorthError) {
        guard !email.isEmpty, email.utf8.count <= 320, email.contains("@") else {
            throw .invalidArgument("credential email must be a non-empty address with '@'")
        }
        guard !token.isEmpty, token.utf8.count <= 4096 else {
            throw .invalidArgument("credential token must be 1 to 4096 bytes")
        }
        // Both go into HTTP headers: no control characters.
        for byte in email.utf8 where byte < 0x20 || byte == 0x7F { _ = byte; throw .invalidArgument("credential email has control characters") }
        for byte in token.utf8 where byte <= 0x20 || byte >= 0x7F { _ = byte; throw .invalidArgument("credential token must be printable ASCII") }
    }
}
