/// What callers leave for `TransferEngine`'s thread when it is busy in
/// curl (inflating a body, copying one, running a turn): a start, a wait
/// to watch, a wait reached, in the order they came. A caller never waits
/// for the engine's curl work (`TransferEngine.add`); it leaves its item
/// here, under the inbox's own short lock, and the engine takes them all
/// before its next poll().
///
/// Whether the caller must wake the engine is the other half: the engine
/// says when it is about to sleep in poll() (`pollBegins`) and when it is
/// back (`pollEnded`); an item left while it sleeps wakes it, one left
/// while it runs does not (it takes the inbox before it sleeps again).
///
/// When the engine stops it takes the last items and closes the inbox
/// (`close`) in one step: an item left after that is refused to its caller,
/// which completes it itself; none is kept where no one will take it. A
/// pure value: no lock, clock or thread inside (TransferEngineStallTests,
/// TransferEngineStopTests).
struct EngineInbox<Job: Sendable, Wait: Sendable>: Sendable {
    enum Item: Sendable {
        case arrive(Job)
        case watch(Wait)
        case reach(Wait)
    }

    /// What became of an item a caller left.
    enum Posted: Equatable {
        /// Kept; the engine runs and takes it before it sleeps.
        case kept
        /// Kept; the engine sleeps in poll(): the caller wakes it.
        case keptWake
        /// The engine has stopped: not kept, the caller completes it.
        case refused
    }

    private(set) var items: [Item] = []
    /// The engine thread sleeps in poll() (or is about to).
    private(set) var enginePolls = false
    /// The engine has taken its last items (`close`).
    private(set) var isClosed = false

    /// A caller leaves `item`.
    mutating func post(_ item: Item) -> Posted {
        guard !isClosed else { return .refused }
        items.append(item)
        return enginePolls ? .keptWake : .kept
    }

    /// The engine (or a caller driving curl for it) takes every item, in
    /// the order they came.
    mutating func takeAll() -> [Item] {
        guard !items.isEmpty else { return [] }
        defer { items = [] }
        return items
    }

    /// The engine is about to sleep in poll(); returns whether it may (an
    /// item came since it last took them: no, take them first).
    mutating func pollBegins() -> Bool {
        guard items.isEmpty else { return false }
        enginePolls = true
        return true
    }

    /// The engine's poll() returned.
    mutating func pollEnded() { enginePolls = false }

    /// The engine stops: takes the last items, in order; every later
    /// `post` is refused.
    mutating func close() -> [Item] {
        isClosed = true
        enginePolls = false
        return takeAll()
    }
}
