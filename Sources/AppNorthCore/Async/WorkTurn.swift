import Synchronization

/// Who ends a job that waits for a worker, as a value: the worker that
/// takes it (it runs the work), or the transfer engine's thread at the
/// operation's cancel, its client's cancel or its deadline (it completes
/// the operation at once, without a worker). Exactly one of them wins;
/// WorkTurnTests checks the transitions.
///
///     waiting --workerTakes--> running
///     waiting --ended--> ended
///     (anything else: nil, the loser does nothing)
package enum WorkTurn: UInt8, Sendable, CaseIterable {
    case waiting, running, ended

    package enum Event: Sendable, CaseIterable { case workerTakes, ended }

    /// The turn after `event`, or nil when the job is no longer waiting.
    package func after(_ event: Event) -> WorkTurn? {
        guard self == .waiting else { return nil }
        return event == .workerTakes ? .running : .ended
    }
}

/// One job's `WorkTurn`, moved atomically (the worker and the engine
/// thread race for it; no lock).
package final class WorkTurnCell: Sendable {
    private let raw = Atomic<UInt8>(WorkTurn.waiting.rawValue)

    package init() {}

    package var turn: WorkTurn { WorkTurn(rawValue: raw.load(ordering: .acquiring)) ?? .ended }

    /// Applies `event`; true when it moved the turn (this caller won).
    package func apply(_ event: WorkTurn.Event) -> Bool {
        while true {
            let now = turn
            guard let next = now.after(event) else { return false }
            if raw.compareExchange(expected: now.rawValue, desired: next.rawValue,
                                   ordering: .acquiringAndReleasing).exchanged { return true }
        }
    }
}
