/// What the event queue counts since open: events dropped, by reason, and
/// events the server accepted. One owner, one lock (a leaf: nothing is
/// taken inside it), so the upload thread, `track` and consent changes
/// count without the queue's state lock, and the stats read one snapshot.
///
/// The store counts its own drops (past the limits, purged at import for
/// consent, damaged stretches: `EventStore`); `snapshot(adding:)` adds them
/// in, so the stats' `dropped` object has one figure per reason.
final class EventCounters: Sendable {
    /// Why events left the queue without being delivered: the stats'
    /// `dropped` keys (`key`).
    enum DropReason: Int, CaseIterable, Sendable {
        /// Past the directory's limits, the oldest first.
        case queueLimit
        /// Refused by a 4xx (listed, bisected, discarded, or past a
        /// batch's budget of extra requests).
        case clientError
        /// A single event the server still refused with a 413.
        case payloadTooLarge
        /// Tracked while consent was revoked, or purged by a revocation.
        case consent
        /// Damaged journal stretches and table rows skipped.
        case damaged
        /// Tracked while this install is sampled out (`sample_rate`).
        case sampled
        /// Tracked under a name in `blocked_events`.
        case blocked
        /// Tracked while `appnorth.events` switches events off (`enabled: false`).
        case disabled
        /// Dropped by the before_send hook, or because it failed.
        case filtered

        var key: String {
            switch self {
            case .queueLimit: "queue_limit"
            case .clientError: "client_error"
            case .payloadTooLarge: "payload_too_large"
            case .consent: "consent"
            case .damaged: "damaged"
            case .sampled: "sampled"
            case .blocked: "blocked"
            case .disabled: "disabled"
            case .filtered: "filtered"
            }
        }
    }

    struct Counts: Equatable, Sendable {
        var dropped = [Int](repeating: 0, count: DropReason.allCases.count)
        var delivered = 0

        func dropped(_ reason: DropReason) -> Int { dropped[reason.rawValue] }
    }

    private let counts = Lock(Counts(), level: LockClass.eventCounters)

    func drop(_ count: Int, _ reason: DropReason) {
        guard count > 0 else { return }
        counts.withLock { $0.dropped[reason.rawValue] &+= count }
    }

    func deliver(_ count: Int) {
        counts.withLock { $0.delivered &+= count }
    }

    var delivered: Int { counts.withLock { $0.delivered } }

    /// The counts, with the store's own drops added (`store`: by reason).
    func snapshot(adding store: [DropReason: Int] = [:]) -> Counts {
        var out = counts.withLock { $0 }
        for (reason, count) in store { out.dropped[reason.rawValue] &+= count }
        return out
    }
}

extension LockClass {
    /// `EventCounters.counts`: the queue's counters.
    static let eventCounters = LockClass.leaf("EventCounters.counts")
}
