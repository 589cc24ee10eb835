/// A config value as the typed getters see it.
package enum ConfigValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case real(Double)
    case bool(Bool)
    case null
    case object
    case array
}

/// One config document: a JSON object, kept as the exact text it was served
/// or bundled with, plus each top-level member's exact text and decoded
/// value. Immutable, so readers on any thread use it without a lock and
/// without touching jansson.
package final class ConfigDocument: Sendable {
    /// The object's text, exactly as received (outer whitespace trimmed).
    package let text: String
    /// Top-level keys in text order (a repeated key counts once, where it
    /// last appears, as jansson keeps the last value).
    package let keys: [String]
    private let members: [String: Member]
    /// The parsed object, for change detection (jansson equality).
    let json: JSON

    struct Member: Sendable {
        let text: String
        let value: ConfigValue
    }

    /// An empty object: the default tier's document.
    // process-wide, not a ForkLocal: an immutable document, the same in every process.
    package static let empty = try! ConfigDocument(bytes: Array("{}".utf8), what: "config")

    /// Validates `bytes` as one JSON object (UTF-8, jansson) and indexes it.
    package init(bytes: [UInt8], what: String) throws(AppNorthError) {
        let parsed = try JSON.parse(bytes, what: what)
        guard parsed.kind == .object else { throw .invalidJSON("\(what) is not a JSON object", position: 0) }
        let range = JSONText.valueRange(bytes)
        guard let spans = JSONText.objectMembers(bytes, in: range) else {
            throw .invalidJSON("\(what) is not a JSON object", position: 0)
        }
        var members: [String: Member] = [:]
        var keys: [String] = []
        for (key, span) in spans.reversed() where members[key] == nil {
            guard let value = parsed[key] else { continue }
            members[key] = Member(text: String(decoding: bytes[span], as: UTF8.self), value: Self.value(of: value))
            keys.append(key)
        }
        self.keys = keys.reversed()
        self.members = members
        self.json = parsed
        self.text = String(decoding: bytes[range], as: UTF8.self)
    }

    package convenience init(text: String, what: String) throws(AppNorthError) {
        try self.init(bytes: Array(text.utf8), what: what)
    }

    /// The decoded value of a top-level key, or nil when absent.
    package func value(_ key: String) -> ConfigValue? { members[key]?.value }

    /// The exact text of a top-level key's value, or nil when absent.
    package func valueText(_ key: String) -> String? { members[key]?.text }

    /// The keys whose values differ between `old` and this document: new
    /// keys and changed values in this document's order, then removed keys
    /// in the old order. Values are compared as JSON (jansson equality):
    /// whitespace, object key order and number spelling such as 1.5 and
    /// 1.50 do not count; 1 and 1.0 do (integer and real differ).
    package func changedKeys(from old: ConfigDocument) -> [String] {
        var changed: [String] = []
        for key in keys {
            guard let mine = json[key] else { continue }
            if let theirs = old.json[key], theirs.isEqual(to: mine) { continue }
            changed.append(key)
        }
        for key in old.keys where members[key] == nil { changed.append(key) }
        return changed
    }

    private static func value(of json: JSON) -> ConfigValue {
        switch json.kind {
        case .string: return .string(json.stringValue ?? "")
        case .integer: return .integer(json.intValue ?? 0)
        case .real: return .real(json.doubleValue ?? 0)
        case .bool: return .bool(json.boolValue ?? false)
        case .null: return .null
        case .object: return .object
        case .array: return .array
        }
    }
}
