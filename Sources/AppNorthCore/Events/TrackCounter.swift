/// Counts `track` calls that have passed their consent check and not yet
/// finished their insert, so that revoking consent can wait for them before
/// it purges: an event that was allowed just before the revocation is
/// purged with the rest instead of landing after the purge (and going out
/// after a later grant).
final class TrackCounter: @unchecked Sendable {
    // @unchecked: `running` is only touched with the condition's mutex held.
    private let condition = MonotonicCondition()
    private var running = 0

    func enter() { condition.locked { running += 1 } }

    func leave() {
        condition.locked {
            running -= 1
            if running == 0 { condition.broadcast() }
        }
    }

    /// Returns once no counted `track` is running. Inserts are bounded by
    /// SQLite's busy timeout, so this is too.
    func waitUntilIdle() {
        condition.locked { condition.wait(until: { running == 0 }, deadline: nil) }
    }
}
