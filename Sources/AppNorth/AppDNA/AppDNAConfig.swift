import AppNorthCore
import Foundation

/// Typed reads of AppDNA's effective config (`AppDNA.config`): remote over
/// cached over bundled, whole documents, as `AppNorthRemoteConfig`
/// resolves them. Keys are top-level keys. Each getter returns `default`
/// when AppDNA is not configured, the key is absent, or its value has
/// another type. Reads are memory only; a read of a config older than its
/// TTL also starts a fetch in the background and returns the stale value.
public struct AppDNAConfig: Sendable {
    let source: AppNorthRemoteConfig?

    public func string(_ key: String, default defaultValue: String) -> String {
        source?.string(key, default: defaultValue) ?? defaultValue
    }

    /// A JSON integer (no fraction or exponent) that fits `Int`.
    public func int(_ key: String, default defaultValue: Int) -> Int {
        guard let source, case .integer(let value)? = source.resolved.document.value(key),
              let exact = Int(exactly: value) else { return defaultValue }
        return exact
    }

    /// Any JSON number.
    public func double(_ key: String, default defaultValue: Double) -> Double {
        source?.double(key, default: defaultValue) ?? defaultValue
    }

    public func bool(_ key: String, default defaultValue: Bool) -> Bool {
        source?.bool(key, default: defaultValue) ?? defaultValue
    }

    /// The exact JSON text of any value (object, array, number as served,
    /// `null`...).
    public func json(_ key: String, default defaultValue: String? = nil) -> String? {
        source?.json(key, default: defaultValue) ?? defaultValue
    }

    /// A value decoded with `JSONDecoder`, or `default` when it is absent
    /// or does not decode as `T`.
    public func decode<T: Decodable>(_ key: String, as type: T.Type = T.self, default defaultValue: T) -> T {
        guard let text = json(key), let value = try? JSONDecoder().decode(T.self, from: Data(text.utf8)) else {
            return defaultValue
        }
        return value
    }

    /// The whole effective config object as served; `{}` when none.
    public var snapshot: String { source?.snapshot() ?? "{}" }

    /// Which tier the values come from (`.default`: none yet).
    public var tier: ConfigTier { source?.resolved.tier ?? .default }
}
