import Synchronization

/// One events handle's applied settings (`EventSettings`): the host's
/// options, overridden by the reserved config key as its configs deliver
/// it (`EventSettingsFeed`). The one place `track` and the upload thread
/// read them from.
///
/// - Whole values are swapped under `state`; with each swap, `gate` is
///   stored: one word saying whether `track` may skip every check (0, the
///   usual case: one relaxed load and nothing else), or which one drops
///   (switched off, sampled out, a blocked list to look in). Only with a
///   blocked list does `track` take the lock, to look the name up.
/// - Sampling is per install, not per event: an install tracks everything
///   or nothing, decided by where its anonymous id falls
///   (`installFraction`, fixed for the handle's life) against the rate. So
///   a user's sessions and funnels stay whole, and over a fleet the share
///   of installs tracking is the rate.
final class EventSettingsOwner: Sendable {
    struct State: Sendable {
        var remote = RemoteEventSettings()
        var applied: EventSettings
        /// The feed's sequence last applied: an older delivery that lost a
        /// race with a newer one is ignored.
        var sequence: UInt64 = 0
        /// Called after a change (the uploader's wake-up).
        var onChange: (@Sendable () -> Void)?
    }

    static let disabledBit = 1, sampledOutBit = 2, blockedBit = 4

    let local: EventSettings
    let installFraction: Double
    let logger: Logger
    let gate = Atomic<Int>(0)
    private let state: Lock<State>

    init(local: EventSettings, anonymousID: String, logger: Logger) {
        self.local = local
        self.logger = logger
        installFraction = Self.fraction(of: anonymousID)
        state = Lock(State(applied: local), level: LockClass.eventSettings)
        gate.store(Self.gate(of: local, installFraction), ordering: .releasing)
    }

    /// The settings now.
    var current: EventSettings { state.withLock { $0.applied } }

    /// Whether this install is sampled in at `current`'s rate.
    var sampledIn: Bool { gate.load(ordering: .relaxed) & Self.sampledOutBit == 0 }
    var uploadsEnabled: Bool { gate.load(ordering: .relaxed) & Self.disabledBit == 0 }
    /// Whether the reserved key sets anything now.
    var remoteApplied: Bool { state.withLock { $0.remote != RemoteEventSettings() } }

    func onChange(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.onChange = body }
    }

    /// Why `track` drops an event by this name now; nil: it goes on.
    @inline(__always)
    func drop(_ name: UnsafeBufferPointer<UInt8>) -> EventCounters.DropReason? {
        let word = gate.load(ordering: .relaxed)
        if word == 0 { return nil }
        return judge(word, name)
    }

    @inline(never)
    private func judge(_ word: Int, _ name: UnsafeBufferPointer<UInt8>) -> EventCounters.DropReason? {
        if word & Self.disabledBit != 0 { return .disabled }
        if word & Self.sampledOutBit != 0 { return .sampled }
        let text = String(decoding: name, as: UTF8.self)
        return state.withLock { $0.applied.blockedEvents.contains(text) } ? .blocked : nil
    }

    /// A new value of the reserved key from the feed (`text`: nil when the
    /// config has none). Refused fields keep their last good value and are
    /// named in one warning; the rest apply at once. Runs on the thread
    /// that delivered the config change, with no lock held.
    func receive(_ text: String?, sequence: UInt64) {
        let outcome = state.withLock { s -> (refused: [String], changed: Bool, wake: (@Sendable () -> Void)?)? in
            guard sequence > s.sequence else { return nil }
            s.sequence = sequence
            let (remote, refused) = RemoteEventSettings.read(text, over: s.remote)
            s.remote = remote
            let applied = remote.applied(to: local)
            let changed = applied != s.applied
            s.applied = applied
            gate.store(Self.gate(of: applied, installFraction), ordering: .releasing)
            return (refused, changed, s.onChange)
        }
        guard let outcome else { return }
        if !outcome.refused.isEmpty {
            logger.log(.warning, "events: config key \(RemoteEventSettings.key) refused: "
                       + outcome.refused.joined(separator: ", ") + "; the last good values stay")
        }
        guard outcome.changed else { return }
        let now = current
        logger.log(.info, "events: settings from \(text == nil ? "the options" : "config key " + RemoteEventSettings.key): "
                   + "enabled \(now.enabled), sample_rate \(now.sampleRate), \(now.blockedEvents.count) blocked event name(s), "
                   + "flush_interval_ms \(now.flushIntervalMilliseconds), batch_threshold \(now.batchThreshold)")
        outcome.wake?()
    }

    static func gate(of settings: EventSettings, _ fraction: Double) -> Int {
        var word = 0
        if !settings.enabled { word |= disabledBit }
        if !(fraction < settings.sampleRate) { word |= sampledOutBit }
        if !settings.blockedEvents.isEmpty { word |= blockedBit }
        return word
    }

    /// Where an install falls in [0, 1): FNV-1a of its anonymous id, its
    /// top 53 bits as a fraction. Stable across restarts and processes on
    /// one data directory (one anonymous id); `reset` keeps it.
    static func fraction(of id: String) -> Double {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Double(hash >> 11) / 9_007_199_254_740_992.0
    }
}

extension LockClass {
    /// `EventSettingsOwner.state`: an events handle's settings in force (`track` takes it
    /// only while a blocked list is set).
    static let eventSettings = LockClass.leaf("EventSettingsOwner.state")
}
