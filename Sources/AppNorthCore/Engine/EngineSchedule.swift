/// When the transfer engine's thread wakes, as a value: how long its poll()
/// may sleep, whether a caller that handed something in must wake it, and
/// when it sweeps for cancels and expired waits. `TransferEngineCore` feeds
/// it events (`handle`) and does what the answer says. No clock, lock or
/// thread inside: `now` comes in as monotonic nanoseconds, so tests drive it
/// with plain numbers (EngineScheduleTests).
///
/// - A poll sleeps until the nearest of curl's timer, the sweep that a turn
///   skipped, a waiting job's or a watched wait's deadline, a second (with
///   work in flight) or an hour (idle); not at all while ended jobs wait
///   for the engine thread to finish them.
/// - While it sleeps, a caller's new socket, an earlier curl timer, a wait
///   due sooner or a job that ended makes `callerDone` answer `.wake`; a
///   job that only joined its origin's queue does not.
/// - A cancel is looked for by the sweep, at most every `sweepIntervalNs`
///   (looking at every transfer on each socket event would cost
///   O(transfers)).
struct EngineSchedule: Sendable, Equatable {
    /// What the engine's next poll() depends on, besides the schedule.
    struct Load: Sendable, Equatable {
        /// No job running or waiting, no wait watched.
        var idle: Bool
        /// curl's timer (nil: none).
        var timerAt: UInt64?
        /// The nearest deadline of a watched wait (nil: none).
        var nearestWait: Deadline?
        /// Ended jobs or waits are still to be finished by the engine thread.
        var endedPending: Bool
        /// No job waits for a place.
        var admissionEmpty: Bool
    }

    enum Event: Sendable, Equatable {
        /// The engine thread is about to sleep in poll().
        case pollBegins(now: UInt64, Load)
        /// poll() returned: a turn runs.
        case turnBegins
        /// The turn's curl work is done: sweep now, if it is time.
        case turnEnds(now: UInt64)
        /// The sweep ran; the jobs still waiting for a place time out at the
        /// earliest at `nextWaiting`.
        case swept(nextWaiting: Deadline?)
        /// curl asked for a new socket, or new events on one.
        case socketWatched
        /// curl set its timer.
        case timerSet(at: UInt64?)
        /// A wait is watched from now on.
        case waitWatched(deadline: Deadline)
        /// A job or wait ended outside a turn (its end is the engine thread's to run).
        case endedOutsideTurn
        /// A caller's hand-in is done.
        case callerDone
    }

    enum Action: Sendable, Equatable {
        case none
        /// Sleep in poll() this long, in ms.
        case poll(milliseconds: Int)
        case sweep
        /// The caller wakes the engine thread.
        case wake
    }

    let sweepIntervalNs: UInt64
    /// When the engine's poll() ends at the latest (nil: it runs a turn).
    private(set) var wakesAt: UInt64? = nil
    /// Something since the poll began needs the engine sooner.
    private(set) var needed = false
    private(set) var lastSweep: UInt64 = 0
    private(set) var sweptLastTurn = false
    /// The earliest total timeout of the jobs waiting for a place (nil: none).
    private(set) var nextWaitingDeadline: Deadline? = nil

    init(sweepIntervalNs: UInt64) { self.sweepIntervalNs = sweepIntervalNs }

    mutating func handle(_ event: Event) -> Action {
        switch event {
        case .pollBegins(let now, let load):
            return .poll(milliseconds: pollBegins(now: now, load))
        case .turnBegins:
            wakesAt = nil
        case .turnEnds(let now):
            sweptLastTurn = now &- lastSweep >= sweepIntervalNs
            guard sweptLastTurn else { return .none }
            lastSweep = now
            return .sweep
        case .swept(let nextWaiting):
            nextWaitingDeadline = nextWaiting
        case .socketWatched, .endedOutsideTurn:
            needed = true
        case .timerSet(let at):
            if let at, let wakesAt, at < wakesAt { needed = true }
        case .waitWatched(let deadline):
            if let wakesAt, deadline.nanoseconds < wakesAt { needed = true }
        case .callerDone:
            defer { needed = false }
            return needed && wakesAt != nil ? .wake : .none
        }
        return .none
    }

    private mutating func pollBegins(now: UInt64, _ load: Load) -> Int {
        needed = false
        if load.admissionEmpty { nextWaitingDeadline = nil }  // the last one was admitted
        if load.endedPending { return 0 }
        var wait = Deadline(milliseconds: load.idle ? 3_600_000 : 1000, after: now)
        if !load.idle && !sweptLastTurn {
            wait = min(wait, Deadline(nanoseconds: lastSweep &+ sweepIntervalNs))
        }
        if let timerAt = load.timerAt { wait = min(wait, Deadline(nanoseconds: timerAt)) }
        if let nextWaitingDeadline { wait = min(wait, nextWaitingDeadline) }
        if let nearest = load.nearestWait { wait = min(wait, nearest) }
        let waitMs = wait.sleepMilliseconds(at: now)
        wakesAt = Deadline(milliseconds: waitMs, after: now).nanoseconds
        return waitMs
    }
}
