/// Where the effective config came from, highest priority last. The raw
/// values are the C header's APPNORTH_CONFIG_TIER_* constants.
public enum ConfigTier: Int32, Sendable, Comparable, CustomStringConvertible {
    /// Nothing is known: every getter returns the caller's default.
    case `default` = 0
    /// The host's bundled JSON file (the seed's appdna-config.json).
    case bundled = 1
    /// The copy persisted in the data directory by an earlier fetch,
    /// loaded when the config was opened.
    case cached = 2
    /// Received from the server by this config object: a fetch, a poll, a
    /// 304 that confirmed the cached copy, or the live stream.
    case remote = 3

    public static func < (a: ConfigTier, b: ConfigTier) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .default: return "default"
        case .bundled: return "bundled"
        case .cached: return "cached"
        case .remote: return "remote"
        }
    }
}

/// What a config listener receives: the new effective config, the
/// top-level keys whose values changed (added, removed or different), and
/// the tier it came from.
package struct ConfigChange: Sendable, Equatable {
    /// The whole config object, exactly as served or bundled.
    package let config: String
    package let changedKeys: [String]
    /// The changed keys as a JSON array of strings.
    package let changedKeysJSON: String
    package let tier: ConfigTier

    package init(config: String, changedKeys: [String], tier: ConfigTier) {
        self.config = config
        self.changedKeys = changedKeys
        self.tier = tier
        let array = JSON.array()
        for key in changedKeys { array.append(.string(key)) }
        changedKeysJSON = array.serialized()
    }

    /// Two changes as one (dispatch mode's coalescing): the later values
    /// and tier, and every key either changed, in the order first seen.
    static func merged(_ earlier: ConfigChange, _ later: ConfigChange) -> ConfigChange {
        var seen = Set(earlier.changedKeys)
        var keys = earlier.changedKeys
        for key in later.changedKeys where seen.insert(key).inserted { keys.append(key) }
        return ConfigChange(config: later.config, changedKeys: keys, tier: later.tier)
    }
}

/// The outcome of the latest exchange with the config endpoints: a fetch
/// (refresh, revalidation, poll), a stream connection attempt or a stream
/// event.
package struct ConfigFetchStatus: Sendable, Equatable {
    /// nil when it succeeded (including a 304).
    package let error: AppNorthError?
    /// When it ended, wall milliseconds; 0 when nothing was attempted yet.
    package let wallMilliseconds: Int64

    package init(error: AppNorthError?, wallMilliseconds: Int64) {
        self.error = error
        self.wallMilliseconds = wallMilliseconds
    }

    package static let none = ConfigFetchStatus(error: nil, wallMilliseconds: 0)
}
