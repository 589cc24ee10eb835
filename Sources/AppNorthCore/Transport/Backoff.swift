/// Exponential backoff with jitter: how long to wait before the next
/// attempt after `attempt` consecutive failures.
///
/// The ceiling doubles per failure from `baseMilliseconds` up to
/// `maxMilliseconds`; jitter then takes a random share of up to
/// `jitter` (0 to 1) off it, so that many clients that failed together do
/// not retry together. With the defaults: about 0.5-1 s, 1-2 s, 2-4 s, ...,
/// at most 60 s. A pure policy: the caller passes the random number.
public struct Backoff: Sendable, Equatable {
    public var baseMilliseconds: Int
    public var maxMilliseconds: Int
    /// The largest share of the delay that jitter may remove, 0 to 1.
    public var jitter: Double

    public init(baseMilliseconds: Int = 1000, maxMilliseconds: Int = 60_000, jitter: Double = 0.5) {
        self.baseMilliseconds = max(1, baseMilliseconds)
        self.maxMilliseconds = max(self.baseMilliseconds, maxMilliseconds)
        self.jitter = jitter.isFinite ? min(1, max(0, jitter)) : 0
    }

    public static let `default` = Backoff()

    /// The ceiling for `attempt` (1 = the first retry): base * 2^(attempt-1),
    /// capped at the maximum.
    public func ceiling(attempt: Int) -> Int {
        guard attempt > 1 else { return baseMilliseconds }
        var delay = baseMilliseconds
        for _ in 1..<min(attempt, 63) {
            if delay >= maxMilliseconds { break }
            delay = delay > maxMilliseconds / 2 ? maxMilliseconds : delay * 2
        }
        return min(delay, maxMilliseconds)
    }

    /// The delay for `attempt` with jitter; `random` is uniform in [0, 1).
    /// Always within [ceiling * (1 - jitter), ceiling].
    public func delay(attempt: Int, random: Double) -> Int {
        let ceiling = Double(ceiling(attempt: attempt))
        let r = min(max(random, 0), 1)
        // Int(Double) traps past Int.max, and a Swift host may set any maximum.
        return Int(exactly: (ceiling * (1 - jitter * r)).rounded()) ?? maxMilliseconds
    }
}
