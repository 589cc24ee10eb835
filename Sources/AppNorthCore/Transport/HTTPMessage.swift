/// One HTTP request, as the core builds it.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", delete = "DELETE" }

    /// Which timeout applies: the API one (default 30 s) or the resource
    /// download one (default 60 s).
    public enum Kind: Sendable { case api, resource }

    public var method: Method
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    public var kind: Kind

    public init(method: Method, url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8]? = nil, kind: Kind = .api) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.kind = kind
    }
}

/// One HTTP response.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// New connections curl opened for this transfer: 0 when it reused a
    /// kept-alive one.
    public var connectionsOpened: Int = 0

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = Text.asciiLowercased(name)
        return headers.first { Text.asciiLowercased($0.name) == wanted }?.value
    }

    public var isSuccess: Bool { (200...299).contains(status) }
}

/// Timeouts in milliseconds. The defaults are the seed's: 30 s for API
/// requests, 60 s for resource downloads.
public struct HTTPTimeouts: Sendable, Equatable {
    public var apiRequestMilliseconds: Int
    public var resourceDownloadMilliseconds: Int
    /// Connection set-up, bounded separately so an unreachable host fails
    /// fast even under long transfer timeouts.
    public var connectMilliseconds: Int

    public init(apiRequestMilliseconds: Int = 30_000, resourceDownloadMilliseconds: Int = 60_000,
                connectMilliseconds: Int = 10_000) {
        self.apiRequestMilliseconds = apiRequestMilliseconds
        self.resourceDownloadMilliseconds = resourceDownloadMilliseconds
        self.connectMilliseconds = connectMilliseconds
    }

    public static let `default` = HTTPTimeouts()

    func milliseconds(for kind: HTTPRequest.Kind) -> Int {
        kind == .api ? apiRequestMilliseconds : resourceDownloadMilliseconds
    }
}
