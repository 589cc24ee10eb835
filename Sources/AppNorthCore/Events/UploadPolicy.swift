import CSystem
import Glibc

/// The host-reported network, which sets how many events go in one request.
public enum NetworkType: Int32, Sendable {
    case unknown = 0, wifi = 1, cellular = 2, expensiveCellular = 3

    /// Wi-Fi 100, cellular 50, expensive or roaming cellular 20; unknown
    /// is treated as the most expensive.
    public var batchSize: Int {
        switch self {
        case .wifi: return 100
        case .cellular: return 50
        case .expensiveCellular, .unknown: return 20
        }
    }

    public var name: String {
        switch self {
        case .unknown: return "unknown"
        case .wifi: return "wifi"
        case .cellular: return "cellular"
        case .expensiveCellular: return "expensive_cellular"
        }
    }
}

/// What to do with a batch after an upload attempt.
public enum UploadOutcome: Sendable, Equatable {
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
public enum UploadStatusPolicy {
    /// `status` is nil when no HTTP answer arrived.
    public static func outcome(for status: Int?) -> UploadOutcome {
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

/// After a failed request the uploader retries 3 times, waiting 1 s, 2 s
/// and 4 s (the base is configurable), each with up to ±20 % jitter so
/// that many clients do not retry in step.
public struct RetrySchedule: Sendable, Equatable {
    public var baseMilliseconds: Int
    public var retries: Int
    public var jitterFraction: Double

    public init(baseMilliseconds: Int = 1000, retries: Int = 3, jitterFraction: Double = 0.2) {
        self.baseMilliseconds = baseMilliseconds
        self.retries = retries
        self.jitterFraction = jitterFraction
    }

    /// The nominal delay before retry `n` (1-based): base × 2^(n-1).
    public func nominalDelay(retry n: Int) -> Int? {
        guard n >= 1, n <= retries, n <= 32 else { return nil }
        return max(0, baseMilliseconds).multipliedSaturating(by: 1 << (n - 1))
    }

    /// The delay with jitter; `unit` is a random number in [0, 1).
    public func delay(retry n: Int, unit: Double) -> Int? {
        guard let nominal = nominalDelay(retry: n) else { return nil }
        // Fractions come from the host: a NaN or huge one must not reach Int().
        let fraction = jitterFraction.isFinite ? min(max(jitterFraction, 0), 1) : 0
        let spread = Double(nominal) * fraction
        let delay = (Double(nominal) - spread + 2 * spread * min(max(unit, 0), 1)).rounded()
        return Int(exactly: delay) ?? nominal
    }
}

/// Counts consecutive failed uploads. Five in a row pause uploads until the
/// host starts a new session or comes to the foreground; one success
/// resets the count.
public struct CircuitBreaker: Sendable, Equatable {
    public static let defaultThreshold = 5
    public let threshold: Int
    public private(set) var consecutiveFailures = 0

    public init(threshold: Int = CircuitBreaker.defaultThreshold) { self.threshold = threshold }

    public var isOpen: Bool { consecutiveFailures >= threshold }

    public mutating func recordSuccess() { consecutiveFailures = 0 }
    public mutating func recordFailure() { consecutiveFailures += 1 }
    /// A new session or a return to the foreground.
    public mutating func reset() { consecutiveFailures = 0 }
}

/// Reads the ids a 400 or 422 answer lists as rejected:
/// `{"error":{"rejected":[{"id":"..."}, ...]}}` (docs/protocol.md). Nil when
/// the body has no such list; entries that are not objects with a string
/// id are skipped.
public enum RejectedEvents {
    public static func ids(in body: [UInt8]) -> Set<String>? {
        guard let parsed = try? JSON.parse(body), let list = parsed["error"]?["rejected"] else { return nil }
        let elements = list.arrayElements
        guard !elements.isEmpty else { return nil }
        return Set(elements.compactMap { $0["id"]?.stringValue })
    }
}
