import AppNorthCore

/// How a thread of the C layer waits for an atomic word to change (the
/// callback gate's, a handle's calls in flight), without polling: it marks
/// the word (sets its waiter bit) and sleeps on `count`'s condition; a
/// change of the word that sees the mark wakes it. The change and the
/// marking are both read-modify-writes of the one word, so one of them
/// sees the other: a waiter is never left asleep after the change it
/// waits for. Each word's owner keeps one in a `ForkLocal` (a fork()
/// child's waiters are its own; the owner clears the mark in the child).
final class WordWaits: Sendable {
    /// Threads waiting now; the last to leave unmarks the word.
    private let count = Lock(0, level: LockLevel.signal)

    /// Waits until `done()`, or the deadline (nil: none). True when done.
    func wait(until deadline: Deadline?, mark: () -> Void, unmark: () -> Void, done: () -> Bool) -> Bool {
        if done() { return true }
        return count.withLock { waiters -> Bool in
            waiters += 1
            mark()
            count.wait(until: done, deadline: deadline)
            waiters -= 1
            if waiters == 0 { unmark() }
            return done()
        }
    }

    /// Wakes every waiter (after a change of a word that carried the mark).
    func wake() {
        count.withLock { _ in count.broadcast() }
    }
}
