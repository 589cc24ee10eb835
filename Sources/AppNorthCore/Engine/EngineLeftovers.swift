/// What the transfer engine does with what it holds when it stops, as a
/// value (no curl, lock, clock or thread inside; TransferEngineStopTests):
/// every job and wait it holds, or was handed before its end, ends exactly
/// once.
///
/// - A job running in curl, one waiting for a place of its origin, and one
///   handed in (the inbox's last items) end cancelled; one handed in is
///   never started.
/// - A wait it watches, or was handed to watch, ends reached when a reach
///   for it came before the stop (what it waited for happened), otherwise
///   cancelled.
/// - A reach for a wait it does not hold (one that ended already) changes
///   nothing.
///
/// The engine ends each with no lock held (`TransferEngine`); a hand-off
/// after this is refused to its caller (`EngineInbox.close`).
struct EngineLeftovers<Job: Sendable, Wait: Sendable, Key: Hashable> {
    /// The jobs to end cancelled: running, waiting, then handed in.
    private(set) var jobs: [Job]
    /// The waits to end, and whether each was reached (those first, then
    /// the rest in the order they were watched).
    private(set) var waits: [(wait: Wait, reached: Bool)] = []

    /// `key` tells two references to one wait apart from two waits.
    init(running: [Job], waiting: [Job], watched: [Wait], inbox: [EngineInbox<Job, Wait>.Item], key: (Wait) -> Key) {
        jobs = running + waiting
        var held: [Key: Wait] = [:]
        var order: [Key] = []
        var reached: Set<Key> = []
        func hold(_ wait: Wait) {
            let k = key(wait)
            guard held[k] == nil, !reached.contains(k) else { return }  // once each
            held[k] = wait
            order.append(k)
        }
        for wait in watched { hold(wait) }
        for item in inbox {
            switch item {
            case .arrive(let job): jobs.append(job)
            case .watch(let wait): hold(wait)
            case .reach(let wait):
                guard let ends = held.removeValue(forKey: key(wait)) else { break }
                reached.insert(key(wait))
                waits.append((ends, true))
            }
        }
        for k in order { if let wait = held[k] { waits.append((wait, false)) } }
    }
}
