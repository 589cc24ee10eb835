import CSystem
import Glibc

/// The host-reported network, which sets how many events go in one request.
public enum NetworkType: Int32, Sendable {
    case unknown = 0, wifi = 1, cellular = 2, expensiveCellular = 3

    /// Wi-Fi 100, cellular 50, expensive or roaming cellular 20; unknown
    /// is treated as the most expensive.
    package var batchSize: Int {
        switch self {
        case .wifi: return 100
        case .cellular: return 50
        case .expensiveCellular, .unknown: return 20
        }
    }

    package var name: String {
        switch self {
        case .unknown: return "unknown"
        case .wifi: return "wifi"
        case .cellular: return "cellular"
        case .expensiveCellular: return "expensive_cellular"
        }
    }
}

/// What to do with a batch after an upload attempt.
package enum UploadOutcome: Sendable, Equatable {
    /// 2xx: remove the events.
    case delivered
    /// 4xx other than 408, 413 and 429: discard the batch, no retry.
    case discard
    /// 413: split the batch in halves; a single event is discarded.
    case split
    /// 5xx, 408, 429 or no response: keep the events and retry.
    case retry
}

/// The seed's status-code table, as a pure function.
package enum UploadStatusPolicy {
    /// `status` is nil when no HTTP answer arrived.
    package static func outcome(for status: Int?) -> UploadOutcome {
        guard let status else { return .retry }
        switch status {
        case 200...299: return .delivered
        case 413: return .split
        case 408, 429: return .retry
        case 400...499: return .discard
        default: return .retry
        }
    }
}

/// Counts consecutive failed uploads. Five in a row pause uploads until the
/// host starts a new session or comes to the foreground; one success
/// resets the count.
package struct CircuitBreaker: Sendable, Equatable {
    package static let defaultThreshold = 5
    package let threshold: Int
    package private(set) var consecutiveFailures = 0

    package init(threshold: Int = CircuitBreaker.defaultThreshold) { self.threshold = threshold }

    package var isOpen: Bool { consecutiveFailures >= threshold }

    package mutating func recordSuccess() { consecutiveFailures = 0 }
    package mutating func recordFailure() { consecutiveFailures += 1 }
    /// A new session or a return to the foreground.
    package mutating func reset() { consecutiveFailures = 0 }
}

/// Reads the ids a 400 or 422 answer lists as rejected:
/// `{"error":{"rejected":[{"id":"..."}, ...]}}` (docs/protocol.md). Nil when
/// the body has no such list; entries that are not objects with a string
/// id are skipped.
package enum RejectedEvents {
    package static func ids(in body: [UInt8]) -> Set<String>? {
        guard let parsed = try? JSON.parse(body), let list = parsed["error"]?["rejected"] else { return nil }
        let elements = list.arrayElements
        guard !elements.isEmpty else { return nil }
        return Set(elements.compactMap { $0["id"]?.stringValue })
    }
}
