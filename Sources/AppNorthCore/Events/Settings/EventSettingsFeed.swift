/// The link from a client's configs to its events handles: the latest
/// value of the reserved config key `appnorth.events` that a config made
/// with the client resolved (at open, from the bundled or cached tier) or
/// received (a fetch, a poll, the stream), and the events handles that
/// follow it. No host code is involved: an events handle follows its
/// client's feed unless its options opt out.
///
/// A config posts under its own state lock, so posts keep the order of
/// its changes, and delivers after releasing it. A delivery always sends
/// the latest value with its sequence number, and a handle ignores one
/// older than what it applied, so two deliveries racing end on the newest.
/// The feed's lock is a leaf: nothing is called inside it.
package final class EventSettingsFeed: Sendable {
    private struct Follower: @unchecked Sendable {
        // @unchecked: read and written under the feed's lock only.
        let token: Int
        weak var owner: EventSettingsOwner?
    }

    private struct State: Sendable {
        /// The key's text (nil: the config has no such key), once a config posted.
        var latest: String?? = nil
        var sequence: UInt64 = 0
        var followers: [Follower] = []
        var nextToken = 1
    }

    private let state = Lock(State(), level: LockClass.eventSettingsFeed)

    package init() {}

    /// Records `document`'s value of the key, if it differs from the latest.
    func post(_ document: ConfigDocument) {
        let text = document.valueText(RemoteEventSettings.key)
        state.withLock { s in
            if case .some(let held) = s.latest, held == text { return }
            s.latest = .some(text)
            s.sequence &+= 1
        }
    }

    /// Sends the latest value to every follower, on this thread.
    func deliver() {
        let (latest, sequence, owners) = state.withLock { s in
            s.followers.removeAll { $0.owner == nil }
            return (s.latest, s.sequence, s.followers.compactMap(\.owner))
        }
        guard case .some(let text) = latest else { return }
        for owner in owners { owner.receive(text, sequence: sequence) }
    }

    /// `owner` follows the feed from now on, starting with the latest
    /// value (applied here, on this thread). Returns the token `unfollow`
    /// takes.
    func follow(_ owner: EventSettingsOwner) -> Int {
        let (token, latest, sequence) = state.withLock { s in
            let token = s.nextToken
            s.nextToken += 1
            s.followers.append(Follower(token: token, owner: owner))
            return (token, s.latest, s.sequence)
        }
        if case .some(let text) = latest { owner.receive(text, sequence: sequence) }
        return token
    }

    func unfollow(_ token: Int) {
        state.withLock { $0.followers.removeAll { $0.token == token } }
    }
}

extension LockClass {
    /// `EventSettingsFeed.state`: a client's latest `appnorth.events` value and its followers
    /// (posted inside `ConfigEngine.state`; delivered with it released).
    static let eventSettingsFeed = LockClass.leaf("EventSettingsFeed.state")
}
