import Glibc

/// Host listeners with tokens, and the delivery of events to them.
///
/// - `add` returns a token (1, 2, 3, ...); `remove(token)` is the only way
///   to stop callbacks. When that listener's callback is running on another
///   thread, `remove` waits for it to return; called from inside that
///   callback (same thread) it returns at once, and the callback is never
///   called again.
/// - Events are queued by `post` (cheap; callers may hold their own lock,
///   which fixes the order) and delivered by `deliverPending`, with no lock
///   held while a callback runs. One thread delivers at a time, events in
///   post order, each to the listeners registered when its turn comes: so
///   callbacks never run concurrently with each other. A thread that
///   finds another one delivering leaves its events to that thread rather
///   than wait for it (waiting could deadlock a host whose callback takes
///   a lock the caller holds); a callback that posts more events (for
///   instance through a refresh) has them delivered after it returns.
/// - `close` drops what is queued, stops further callbacks, and waits for
///   one in flight on another thread.
/// - Dispatch mode (a `dispatcher`): `deliverPending` delivers nothing on
///   the posting thread; it queues one delivery job on the dispatcher (at
///   most one at a time), which the host's dispatch runs. Events posted
///   meanwhile are merged into one by `merge` (a config change: the latest
///   values, the union of changed keys), so the queue holds one event at
///   most and none is lost. Removal and close work as above: a removed
///   listener is skipped by a queued delivery, and a closed registry's
///   queued job delivers nothing.
final class ListenerRegistry<Event: Sendable>: @unchecked Sendable {
    // @unchecked: every field is read and written with `condition`'s mutex held.
    typealias Callback = @Sendable (Event) -> Void
    typealias Merge = @Sendable (Event, Event) -> Event

    private let condition = Lock<Void>((), level: LockClass.listeners)
    private let dispatcher: CallbackDispatcher?
    private let merge: Merge?
    /// Dispatch mode: a delivery job is queued on the dispatcher.
    private var scheduled = false
    private var listeners: [(token: Int64, callback: Callback)] = []
    private var nextToken: Int64 = 1
    private var queue: [Event] = []
    /// The thread delivering now (0: none), and the listener it is calling.
    private var deliverer: UInt = 0
    private var inFlight: Int64 = 0
    private var closed = false

    private static var currentThread: UInt { UInt(pthread_self()) }

    /// `dispatcher` nil: delivered on the posting thread. `merge` folds an
    /// event into the one queued before it (dispatch mode only).
    init(dispatcher: CallbackDispatcher? = nil, merge: Merge? = nil) {
        self.dispatcher = dispatcher
        self.merge = merge
    }

    private func locked<T>(_ body: () -> T) -> T { condition.locked(body) }

    var count: Int { locked { listeners.count } }

    /// Registers a callback; nil once closed.
    func add(_ callback: @escaping Callback) -> Int64? {
        locked {
            guard !closed else { return nil }
            let token = nextToken
            nextToken += 1
            listeners.append((token, callback))
            return token
        }
    }

    /// Unregisters a callback and waits for a call of it in flight on
    /// another thread. Returns false for an unknown token.
    @discardableResult
    func remove(_ token: Int64) -> Bool {
        let me = Self.currentThread
        return locked {
            guard let index = listeners.firstIndex(where: { $0.token == token }) else { return false }
            listeners.remove(at: index)
            condition.wait(until: { !(inFlight == token && deliverer != 0 && deliverer != me) }, deadline: nil)
            return true
        }
    }

    /// Queues an event for delivery.
    func post(_ event: Event) {
        locked {
            guard !closed else { return }
            if dispatcher != nil, let merge, let last = queue.last {
                queue[queue.count - 1] = merge(last, event)
            } else {
                queue.append(event)
            }
        }
    }

    /// Delivers queued events on this thread, unless another thread (or
    /// this one, further up the stack) is already delivering: that one
    /// delivers them. In dispatch mode: queues a delivery job instead.
    func deliverPending() {
        guard let dispatcher else {
            _ = deliverNow()
            return
        }
        let schedule = locked { () -> Bool in
            guard !closed, !queue.isEmpty, !scheduled else { return false }
            scheduled = true
            return true
        }
        guard schedule else { return }
        let posted = dispatcher.postCounted { [self] in
            locked { scheduled = false }
            return deliverNow()
        }
        if !posted { locked { scheduled = false } }
    }

    /// Delivers queued events on this thread (see `deliverPending`);
    /// returns how many callbacks ran.
    private func deliverNow() -> Int {
        let me = Self.currentThread
        var calls = 0
        locked {
            guard deliverer == 0 else { return }
            deliverer = me
            while !closed && !queue.isEmpty {
                let event = queue.removeFirst()
                let tokens = listeners.map(\.token)
                for token in tokens {
                    guard !closed else { break }
                    // Skip listeners removed since, including by earlier callbacks.
                    guard let listener = listeners.first(where: { $0.token == token }) else { continue }
                    inFlight = token
                    condition.unlocked { listener.callback(event) }
                    calls += 1
                    inFlight = 0
                    condition.broadcast()
                }
            }
            deliverer = 0
            condition.broadcast()
        }
        return calls
    }

    /// Stops all deliveries: drops queued events and listeners, and waits
    /// for a callback in flight on another thread. Idempotent.
    func close() {
        let me = Self.currentThread
        locked {
            closed = true
            queue.removeAll()
            listeners.removeAll()
            condition.wait(until: { !(inFlight != 0 && deliverer != 0 && deliverer != me) }, deadline: nil)
        }
    }
}

extension LockClass {
    /// `ListenerRegistry.condition`: a listener registry's listeners and queue (its
    /// callbacks run with it released).
    static let listeners = LockClass(rank: 100, "ListenerRegistry.condition")
}
