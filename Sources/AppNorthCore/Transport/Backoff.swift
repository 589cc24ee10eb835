/// Exponential backoff with jitter: how long to wait before the next
/// attempt after `attempt` consecutive failures. The one backoff type of
/// the core, with the two jitter modes its users ship:
///
/// - the config's reconnects (`init(baseMilliseconds:maxMilliseconds:jitter:)`):
///   the ceiling doubles per failure from `baseMilliseconds` up to
///   `maxMilliseconds`, and jitter takes a random share of up to `jitter`
///   off it (`.belowCeiling`). With the defaults: about 0.5-1 s, 1-2 s,
///   2-4 s, ..., at most 60 s; no limit on attempts.
/// - the events' retries (`init(retries:baseMilliseconds:spread:)`): 3
///   retries after 1 s, 2 s and 4 s, each moved by up to ±20 %
///   (`.aroundNominal`); past the last retry `delay(retry:unit:)` is nil.
///
/// Either way many clients that failed together do not retry together. A
/// pure policy: the caller passes the random number. Host values (huge
/// bases, NaN shares) never trap: arithmetic saturates, shares are clamped.
package struct Backoff: Sendable, Equatable {
    package enum JitterMode: Sendable, Equatable {
        /// Within [ceiling × (1 − jitter), ceiling].
        case belowCeiling
        /// Within [nominal × (1 − jitter), nominal × (1 + jitter)].
        case aroundNominal
    }

    package var baseMilliseconds: Int
    package var maxMilliseconds: Int
    /// The jitter's share of the delay, 0 to 1 (a value outside is clamped
    /// when used; NaN or infinite means none).
    package var jitter: Double
    package var jitterMode: JitterMode
    /// How many retries `delay(retry:unit:)` gives (at most 32); `Int.max`
    /// for the config's unlimited attempts.
    package var retries: Int

    /// The config's reconnect backoff.
    package init(baseMilliseconds: Int = 1000, maxMilliseconds: Int = 60_000, jitter: Double = 0.5) {
        self.baseMilliseconds = max(1, baseMilliseconds)
        self.maxMilliseconds = max(self.baseMilliseconds, maxMilliseconds)
        self.jitter = Self.share(jitter)
        jitterMode = .belowCeiling
        retries = .max
    }

    /// The events' retry schedule: `retries` retries, the n-th after
    /// base × 2^(n-1), moved by up to ±`spread`.
    package init(retries: Int, baseMilliseconds: Int = 1000, spread: Double = 0.2) {
        self.baseMilliseconds = baseMilliseconds
        maxMilliseconds = .max
        jitter = spread
        jitterMode = .aroundNominal
        self.retries = retries
    }

    package static let `default` = Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000, jitter: 0.5)

    /// The ceiling for `attempt` (1 = the first retry): base × 2^(attempt-1),
    /// capped at the maximum.
    package func ceiling(attempt: Int) -> Int {
        let doublings = min(max(attempt, 1) - 1, 62)
        return min(max(0, baseMilliseconds).multipliedSaturating(by: 1 << doublings), maxMilliseconds)
    }

    /// The delay for `attempt` with jitter; `random` is uniform in [0, 1).
    package func delay(attempt: Int, random: Double) -> Int {
        let ceiling = ceiling(attempt: attempt)
        let share = Self.share(jitter)
        let r = min(max(random, 0), 1)
        // Int(Double) traps past Int.max, and a Swift host may set any maximum.
        switch jitterMode {
        case .belowCeiling:
            return Int(exactly: (Double(ceiling) * (1 - share * r)).rounded()) ?? maxMilliseconds
        case .aroundNominal:
            let spread = Double(ceiling) * share
            return Int(exactly: (Double(ceiling) - spread + 2 * spread * r).rounded()) ?? ceiling
        }
    }

    /// The nominal delay before retry `n` (1-based), nil past the last.
    package func nominalDelay(retry n: Int) -> Int? {
        guard n >= 1, n <= retries, n <= 32 else { return nil }
        return ceiling(attempt: n)
    }

    /// The delay before retry `n` with jitter (`unit` in [0, 1)), nil past the last.
    package func delay(retry n: Int, unit: Double) -> Int? {
        guard nominalDelay(retry: n) != nil else { return nil }
        return delay(attempt: n, random: unit)
    }

    private static func share(_ value: Double) -> Double {
        value.isFinite ? min(1, max(0, value)) : 0
    }
}
