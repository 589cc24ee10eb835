/// The settings the event pipeline runs by: whether it tracks and uploads,
/// the share of installs that track, the event names refused, and the
/// upload triggers. The host's options give them at open; the reserved
/// config key `appnorth.events` (`RemoteEventSettings`) overrides them
/// field by field. Immutable values: `EventSettingsOwner` swaps whole ones.
package struct EventSettings: Sendable, Equatable {
    /// false: `track` drops every event (`dropped.disabled`) and nothing
    /// is uploaded; queued events stay queued.
    package var enabled = true
    /// The share of installs that track, 0 to 1 (per install: see
    /// `EventSettingsOwner.installFraction`).
    package var sampleRate = 1.0
    /// Event names `track` drops (`dropped.blocked`).
    package var blockedEvents: Set<String> = []
    package var flushIntervalMilliseconds = 30_000
    package var batchThreshold = 20

    package init() {}

    /// The bounds every source is held to: the options' setters and the
    /// remote key alike.
    package static let flushIntervalRange = 10...86_400_000
    package static let batchThresholdRange = 1...10_000
    package static let sampleRateRange = 0.0...1.0
    /// At most this many blocked names, each a valid event name (1 to 256
    /// characters, as `track` takes them).
    package static let maxBlockedEvents = 1000

    /// The host's options as settings.
    package init(options: AppNorthEventsOptions) {
        sampleRate = options.sampleRate
        flushIntervalMilliseconds = options.flushIntervalMilliseconds
        batchThreshold = options.batchThreshold
    }

    package static func validSampleRate(_ rate: Double) -> Bool { sampleRateRange.contains(rate) }
}

/// The reserved config key's value, as far as it was valid: each field is
/// nil where the key does not set it (the host's option applies) and keeps
/// its last good value where the new one is out of range or of the wrong
/// type (refused, named in one log line). Pure, so tests drive it with
/// plain text.
package struct RemoteEventSettings: Sendable, Equatable {
    /// The reserved top-level config key.
    package static let key = "appnorth.events"

    package var enabled: Bool?
    package var sampleRate: Double?
    package var blockedEvents: Set<String>?
    package var flushIntervalMilliseconds: Int?
    package var batchThreshold: Int?

    package init() {}

    /// What the key sets, over the host's settings.
    package func applied(to local: EventSettings) -> EventSettings {
        var out = local
        if let enabled { out.enabled = enabled }
        if let sampleRate { out.sampleRate = sampleRate }
        if let blockedEvents { out.blockedEvents = blockedEvents }
        if let flushIntervalMilliseconds { out.flushIntervalMilliseconds = flushIntervalMilliseconds }
        if let batchThreshold { out.batchThreshold = batchThreshold }
        return out
    }

    /// The key's new value (`text`: its exact JSON text; nil when the
    /// config has no such key: every field goes back to the host's
    /// option) read over the last good one. Returns the result and what
    /// was refused (empty when everything was taken). Unknown fields are
    /// ignored, for settings later versions add.
    package static func read(_ text: String?, over last: RemoteEventSettings) -> (RemoteEventSettings, refused: [String]) {
        guard let text else { return (RemoteEventSettings(), []) }
        guard let json = try? JSON.parse(text, what: key), json.kind == .object else {
            return (last, ["\(key) is not a JSON object"])
        }
        var out = RemoteEventSettings(), refused: [String] = []
        func field<T>(_ name: String, _ keep: T?, _ read: (JSON) -> T?, _ rule: String) -> T? {
            guard let value = json[name] else { return nil }
            if let good = read(value) { return good }
            refused.append("\(name) (\(rule))")
            return keep
        }
        out.enabled = field("enabled", last.enabled, { $0.boolValue }, "true or false")
        out.sampleRate = field("sample_rate", last.sampleRate, number, "a number from 0 to 1")
        out.blockedEvents = field("blocked_events", last.blockedEvents, names,
                                  "an array of at most \(EventSettings.maxBlockedEvents) event names")
        out.flushIntervalMilliseconds = field("flush_interval_ms", last.flushIntervalMilliseconds,
                                              { integer($0, EventSettings.flushIntervalRange) }, "an integer from 10 to 86400000")
        out.batchThreshold = field("batch_threshold", last.batchThreshold,
                                   { integer($0, EventSettings.batchThresholdRange) }, "an integer from 1 to 10000")
        return (out, refused)
    }

    private static func number(_ value: JSON) -> Double? {
        let rate: Double
        switch value.kind {
        case .integer: rate = Double(value.intValue ?? -1)
        case .real: rate = value.doubleValue ?? -1
        default: return nil
        }
        return EventSettings.validSampleRate(rate) ? rate : nil
    }

    private static func integer(_ value: JSON, _ range: ClosedRange<Int>) -> Int? {
        guard let n = value.intValue, n >= Int64(range.lowerBound), n <= Int64(range.upperBound) else { return nil }
        return Int(n)
    }

    private static func names(_ value: JSON) -> Set<String>? {
        guard value.kind == .array, value.count <= EventSettings.maxBlockedEvents else { return nil }
        var out = Set<String>()
        for element in value.arrayElements {
            guard let name = element.stringValue, !name.isEmpty, name.unicodeScalars.count <= TrackInput.maxNameCharacters
            else { return nil }
            out.insert(name)
        }
        return out
    }
}
