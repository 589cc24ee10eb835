/// A non-blocking operation's life as a value: its phases and the events
/// that move it, with no lock, clock or thread (the `OperationTable` keeps
/// one per operation and applies events under its lock;
/// OperationPhaseTests checks every transition).
///
///     started --launched--> running
///     started | running | cancelled --cancelRequested--> cancelled
///     started | running | cancelled --completionBegins--> completing
///     any but completed --completionDelivered--> completed
///
/// A completion may begin before `launched` (the work can end before its
/// start call returns); a launch after a cancel stays cancelled. Events
/// that change nothing (a cancel once the completion began, a second
/// delivery) give nil: the caller did nothing.
package enum OperationPhase: Sendable, Equatable, CaseIterable {
    /// Registered; its work not yet handed to the transfer thread or a worker.
    case started
    /// Its work runs.
    case running
    /// Asked to end; its completion (cancelled, or its real outcome if it
    /// was finishing) is still to come.
    case cancelled
    /// Its completion is being delivered: a cancel no longer finds it.
    case completing
    /// Delivered: it no longer counts for its owners.
    case completed

    package enum Event: Sendable, CaseIterable {
        case launched, cancelRequested, completionBegins, completionDelivered
    }

    /// The phase after `event`, or nil when the event does nothing here.
    package func after(_ event: Event) -> OperationPhase? {
        switch (self, event) {
        case (.started, .launched): .running
        case (.started, .cancelRequested), (.running, .cancelRequested), (.cancelled, .cancelRequested): .cancelled
        case (.started, .completionBegins), (.running, .completionBegins), (.cancelled, .completionBegins): .completing
        case (.completed, .completionDelivered): nil
        case (_, .completionDelivered): .completed
        default: nil
        }
    }

    /// `appnorth_op_cancel` finds it (its completion has not begun).
    package var isCancellable: Bool { self == .started || self == .running || self == .cancelled }

    /// It counts for its owners (a handle's free waits for it).
    package var isInFlight: Bool { self != .completed }
}
