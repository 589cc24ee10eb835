import AppNorthCore

/// How a thread of the C layer waits for an atomic word to change (the
/// callback gate's, a handle's calls in flight), without polling: it marks
/// the word (sets its waiter bit) and sleeps on `count`'s condition; a
/// change of the word that sees the mark wakes it. The change and the
/// marking are both read-modify-writes of the one word, so one of them
/// sees the other: a waiter is never left asleep after the change it
/// waits for. Each word's owner keeps one in a `ForkLocal` (a fork()
/// child's waiters are its own; the owner clears the mark in the child).
final class WordWaits: @unchecked Sendable {
    // @unchecked: `waiters` is only touched with `condition` locked, and
    // it is a field, not the lock's value: a value held as an `inout`
    // across the condition's wait may be kept in a register while the
    // lock is released, and another waiter's count would be lost.
    private let condition = Lock<Void>((), level: LockClass.signal)
    /// Threads waiting now; the last to leave unmarks the word.
    private var waiters = 0

    /// Waits until `done()`, or the deadline (nil: none). True when done.
    func wait(until deadline: Deadline?, mark: () -> Void, unmark: () -> Void, done: () -> Bool) -> Bool {
        if done() { return true }
        return condition.locked { () -> Bool in
            waiters += 1
            mark()
            condition.wait(until: done, deadline: deadline)
            waiters -= 1
            if waiters == 0 { unmark() }
            return done()
        }
    }

    /// Wakes every waiter (after a change of a word that carried the mark).
    func wake() {
        condition.locked { condition.broadcast() }
    }
}
