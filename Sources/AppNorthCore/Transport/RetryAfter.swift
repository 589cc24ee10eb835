import CSystem
import Glibc

/// Reads a Retry-After header: delay-seconds or an HTTP date, capped.
/// The header is the server's: any number or date it sends, however
/// large, gives a wait within [0, capMs] (saturating arithmetic).
package enum RetryAfter {
    /// The longest wait a server may impose unless the host sets another
    /// cap (the events option `retryAfterCapMilliseconds`).
    package static let defaultCapMilliseconds = 120_000

    /// The wait a 429 or 503 answer asks for; nil for any other status or
    /// without a readable header. The events uploader and the config
    /// thread both read answers through this, so they honour the same
    /// statuses.
    package static func milliseconds(for response: HTTPResponse, nowWallMs: Int64, capMs: Int) -> Int? {
        guard response.status == 429 || response.status == 503 else { return nil }
        return milliseconds(response.header("Retry-After"), nowWallMs: nowWallMs, capMs: capMs)
    }

    package static func milliseconds(_ header: String?, nowWallMs: Int64, capMs: Int) -> Int? {
        guard let header = header.map({ String(Text.trimmed($0)) }), !header.isEmpty else { return nil }
        let cap = max(0, capMs)
        if let seconds = Int(header) {
            return min(max(0, seconds).multipliedSaturating(by: 1000), cap)
        }
        var parts = tm()
        let parsed = header.withCString { strptime($0, "%a, %d %b %Y %H:%M:%S GMT", &parts) }
        guard parsed != nil else { return nil }
        let when = Int64(timegm(&parts)).multipliedSaturating(by: 1000)
        return Int(min(Int64(cap), max(0, when.subtractingSaturating(nowWallMs))))
    }
}
