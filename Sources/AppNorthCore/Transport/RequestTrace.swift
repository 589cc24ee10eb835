/// The DEBUG line for one HTTP request: method, path (no host, no query:
/// queries may hold the user's search text), status or error, duration,
/// protocol (HTTP/1.1 or HTTP/2) and bytes. Headers and bodies
/// (credentials, identity values, payloads) are never logged. Costs nothing
/// when DEBUG is off.
struct RequestTrace {
    private let logger: Logger
    private let method: String
    private let path: String
    private let sent: Int
    /// " gzip" when the body went compressed, else "".
    private let encoding: String
    private let startedNs: UInt64

    init(_ request: HTTPRequest, _ logger: Logger) {
        self.logger = logger
        guard logger.enabled(.debug) else {
            method = ""; path = ""; sent = 0; encoding = ""; startedNs = 0
            return
        }
        method = request.method.rawValue
        path = Self.path(of: request.url)
        sent = request.body?.count ?? 0
        encoding = request.headers.contains { $0.name == "Content-Encoding" && $0.value == "gzip" } ? " gzip" : ""
        startedNs = SystemClock().monotonicNanoseconds()
    }

    /// Runs `exchange` (the request's transfer) and traces its answer or error.
    func record(_ exchange: () throws(AppNorthError) -> HTTPResponse) throws(AppNorthError) -> HTTPResponse {
        do {
            let response = try exchange()
            finished(response)
            return response
        } catch {
            failed(error)
            throw error
        }
    }

    private func finished(_ response: HTTPResponse) {
        guard startedNs != 0 else { return }
        let over = response.protocolName.isEmpty ? "" : " over \(response.protocolName)"
        logger.log(.debug, "HTTP \(method) \(path) -> \(response.status) in \(elapsedMs) ms\(over) "
                   + "(sent \(sent) B\(encoding), received \(response.body.count) B)")
    }

    private func failed(_ error: AppNorthError) {
        guard startedNs != 0 else { return }
        logger.log(.debug, "HTTP \(method) \(path) failed after \(elapsedMs) ms: \(error.message)")
    }

    private var elapsedMs: UInt64 { (SystemClock().monotonicNanoseconds() &- startedNs) / 1_000_000 }

    /// "/v1/apps/demo/ideas" from "http://host:8080/v1/apps/demo/ideas?q=x".
    static func path(of url: String) -> String {
        var rest = Substring(url)
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            rest = rest[rest.index(colon, offsetBy: 3)...]
        }
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        rest = rest[slash...]
        if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<query] }
        return String(rest)
    }
}
