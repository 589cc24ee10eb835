import CCurl
import Glibc

/// One HTTP request, as the core builds it.
package struct HTTPRequest: Sendable {
    package enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", delete = "DELETE" }

    /// Which timeout applies: the API one (default 30 s) or the resource
    /// download one (default 60 s).
    package enum Kind: Sendable { case api, resource }

    package var method: Method
    package var url: String
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]?
    package var kind: Kind

    package init(method: Method, url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8]? = nil, kind: Kind = .api) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.kind = kind
    }
}

/// One HTTP response.
package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// New connections curl opened for this transfer: 0 when it reused a
    /// kept-alive one.
    package var connectionsOpened: Int = 0
    /// The protocol the response came over: "HTTP/1.1", "HTTP/2" (https
    /// with a server that chose h2 in ALPN), "HTTP/1.0"; "" when unknown.
    package var protocolName: String = ""

    /// "HTTP/2" for curl's CURLINFO_HTTP_VERSION value CURL_HTTP_VERSION_2_0, and so on.
    static func protocolName(curlVersion: Int) -> String {
        switch curlVersion {
        case Int(CURL_HTTP_VERSION_1_0): return "HTTP/1.0"
        case Int(CURL_HTTP_VERSION_1_1): return "HTTP/1.1"
        case Int(CURL_HTTP_VERSION_2_0): return "HTTP/2"
        case 30: return "HTTP/3"  // CURL_HTTP_VERSION_3 (7.66+)
        default: return ""
        }
    }

    /// The response fields the core reads (`header(_:)`'s callers). A
    /// whole answer (not a stream) holds only these: curl keeps every field
    /// of the transfer, and `readFields` takes these from it once it is
    /// done. Add a name here before reading it.
    static let readNames = ["ETag", "Retry-After"]

    /// `readNames` from a finished transfer's easy handle (the last
    /// response's fields, not a proxy's or a trailer; the first of
    /// duplicates). A value is as curl gives it (no blanks around it,
    /// folded lines joined), invalid UTF-8 repaired; a value longer than
    /// `HTTPHeaderLine.maxLineBytes` is ignored.
    static func readFields(of handle: UnsafeMutableRawPointer) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        for name in readNames {
            var header: UnsafeMutablePointer<curl_header>? = nil
            guard name.withCString({ cshim_easy_header(handle, $0, 0, UInt32(CURLH_HEADER), -1, &header) }) == CURLHE_OK,
                  let value = header?.pointee.value else { continue }
            let length = strnlen(value, HTTPHeaderLine.maxLineBytes + 1)
            guard length <= HTTPHeaderLine.maxLineBytes else { continue }
            fields.append((name, String(decoding: UnsafeRawBufferPointer(start: value, count: length), as: UTF8.self)))
        }
        return fields
    }

    /// The first header with this name, compared case-insensitively.
    package func header(_ name: String) -> String? {
        // A whole answer holds only readNames: reading another would always
        // be nil (debug builds stop here instead).
        assert(Self.readNames.contains { Self.sameName($0, name) }, "add \(name) to HTTPResponse.readNames")
        return headers.first { Self.sameName($0.name, name) }?.value
    }

    /// Equal but for ASCII case, compared on the bytes.
    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) &- UInt8(ascii: "a") < 26)
        }
    }

    package var isSuccess: Bool { (200...299).contains(status) }
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
