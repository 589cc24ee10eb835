import CJansson
import Glibc

/// A JSON value held by jansson. The core parses, inspects and builds JSON
/// through this one wrapper; nothing else touches `json_t` directly.
///
/// Text the host hands in and that is forwarded unchanged (event properties,
/// config documents) is validated here but kept as the host's own text, since
/// jansson's real formatting turns `9.99` into `9.9900000000000002`.
package final class JSON: @unchecked Sendable {
    // @unchecked: the wrapped tree is never mutated once shared; builders
    // finish before a value is handed to another thread.
    let raw: UnsafeMutablePointer<json_t>

    /// Takes ownership of one reference.
    init(owning raw: UnsafeMutablePointer<json_t>) { self.raw = raw }

    /// Adds a reference to a borrowed value.
    convenience init(borrowing raw: UnsafeMutablePointer<json_t>) {
        self.init(owning: json_incref(raw)!)
    }

    deinit { json_decref(raw) }

    package enum Kind: Sendable { case object, array, string, integer, real, bool, null }

    package var kind: Kind {
        switch raw.pointee.type {
        case JSON_OBJECT: return .object
        case JSON_ARRAY: return .array
        case JSON_STRING: return .string
        case JSON_INTEGER: return .integer
        case JSON_REAL: return .real
        case JSON_TRUE, JSON_FALSE: return .bool
        default: return .null
        }
    }

    // MARK: Parsing

    /// Parses UTF-8 bytes. Any JSON value is accepted at the top level.
    /// Throws `.invalidJSON` with jansson's message and byte position.
    ///
    /// The escape `\u0000` is valid JSON and accepted (JSON_ALLOW_NUL); a
    /// raw NUL byte is not, yet jansson 2.14 takes one right after a number
    /// or a literal. Such text would be cut short wherever it later becomes a
    /// C string, so it is refused here, at the one door all JSON comes in by.
    package static func parse(_ bytes: UnsafeRawBufferPointer, what: String = "JSON",
                             flags extra: size_t = 0) throws(AppNorthError) -> JSON {
        if let base = bytes.baseAddress, bytes.count > 0, let nul = memchr(base, 0, bytes.count) {
            let position = base.distance(to: UnsafeRawPointer(nul))
            throw .invalidJSON("\(what) is not valid JSON: a raw NUL byte at byte \(position)", position: position)
        }
        let flags = size_t(JSON_DECODE_ANY) | size_t(JSON_ALLOW_NUL) | extra
        var error = json_error_t()
        let parsed: UnsafeMutablePointer<json_t>?
        if let base = bytes.baseAddress, bytes.count > 0 {
            parsed = json_loadb(base.assumingMemoryBound(to: CChar.self), bytes.count, flags, &error)
        } else {
            parsed = json_loadb("", 0, flags, &error)
        }
        guard let value = parsed else {
            let text = withUnsafeBytes(of: &error.text) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            throw .invalidJSON("\(what) is not valid JSON: \(text) (line \(error.line), column \(error.column), byte \(error.position))",
                               position: Int(error.position))
        }
        return JSON(owning: value)
    }

    package static func parse(_ text: String, what: String = "JSON") throws(AppNorthError) -> JSON {
        var text = text
        return try text.withUTF8 { buffer in
            Result { () throws(AppNorthError) in try parse(UnsafeRawBufferPointer(buffer), what: what) }
        }.get()
    }

    package static func parse(_ bytes: [UInt8], what: String = "JSON") throws(AppNorthError) -> JSON {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(AppNorthError) in try parse(buffer, what: what) }
        }.get()
    }

    /// Checks that host text is a JSON object without building a tree
    /// (`JSONValidator`: the verdict `parse` with JSON_DECODE_INT_AS_REAL
    /// gives). Integers too large for 64 bits are accepted (read as reals):
    /// the text is forwarded as written, so nothing is lost.
    /// `maxNesting`: the most objects and arrays open at once, the object
    /// itself counted.
    package static func validateObject(_ text: String, what: String, maxNesting: Int = .max) throws(AppNorthError) {
        var text = text
        let top = try text.withUTF8 { buffer in
            Result { () throws(AppNorthError) in
                try JSONValidator.validate(buffer, what: what, integersAsReals: true, maxNesting: maxNesting)
            }
        }.get()
        guard top == .object else { throw .invalidJSON("\(what) must be a JSON object", position: 0) }
    }

    /// Checks that text is JSON (any value), judged as `parse` judges it,
    /// without building a tree: for text that is passed on as it is.
    package static func validate(_ text: String, what: String) throws(AppNorthError) {
        var text = text
        _ = try text.withUTF8 { buffer in
            Result { () throws(AppNorthError) in try JSONValidator.validate(buffer, what: what, integersAsReals: false) }
        }.get()
    }

    /// Parses text that must be a JSON object.
    package static func parseObject(_ text: String, what: String) throws(AppNorthError) -> JSON {
        let value = try parse(text, what: what)
        guard value.kind == .object else {
            throw .invalidJSON("\(what) must be a JSON object", position: 0)
        }
        return value
    }

    // MARK: Serializing

    /// Compact text. Keys keep their insertion order.
    package func serialized() -> String {
        guard let text = json_dumps(raw, size_t(JSON_COMPACT | JSON_ENCODE_ANY)) else { return "null" }
        defer { free(text) }
        return String(cString: text)
    }

    // MARK: Reading

    package subscript(key: String) -> JSON? {
        guard kind == .object, let value = json_object_get(raw, key) else { return nil }
        return JSON(borrowing: value)
    }

    package var stringValue: String? {
        guard kind == .string, let chars = json_string_value(raw) else { return nil }
        let count = json_string_length(raw)
        return chars.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }
    }

    package var intValue: Int64? { kind == .integer ? Int64(json_integer_value(raw)) : nil }

    /// Integers and reals.
    package var doubleValue: Double? {
        kind == .integer || kind == .real ? json_number_value(raw) : nil
    }

    package var boolValue: Bool? {
        switch raw.pointee.type {
        case JSON_TRUE: return true
        case JSON_FALSE: return false
        default: return nil
        }
    }

    package var isNull: Bool { kind == .null }

    package var count: Int {
        switch kind {
        case .array: return json_array_size(raw)
        case .object: return json_object_size(raw)
        default: return 0
        }
    }

    package var arrayElements: [JSON] {
        guard kind == .array else { return [] }
        return (0..<json_array_size(raw)).map { JSON(borrowing: json_array_get(raw, $0)!) }
    }

    /// Object members in their stored order.
    package var objectMembers: [(key: String, value: JSON)] {
        guard kind == .object else { return [] }
        var members: [(String, JSON)] = []
        var iter = json_object_iter(raw)
        while let it = iter {
            let key = String(cString: json_object_iter_key(it))
            members.append((key, JSON(borrowing: json_object_iter_value(it))))
            iter = json_object_iter_next(raw, it)
        }
        return members
    }

    // MARK: Building

    package static func object() -> JSON { JSON(owning: json_object()) }
    package static func array() -> JSON { JSON(owning: json_array()) }
    package static func null() -> JSON { JSON(owning: json_null()) }
    package static func bool(_ value: Bool) -> JSON { JSON(owning: value ? json_true() : json_false()) }
    package static func int(_ value: Int64) -> JSON { JSON(owning: json_integer(json_int_t(value))) }
    package static func double(_ value: Double) -> JSON { JSON(owning: json_real(value)) }

    /// A Swift string is always valid UTF-8, so this cannot fail.
    package static func string(_ value: String) -> JSON {
        var value = value
        let made = value.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                chars.count == 0 ? json_string("") : json_stringn_nocheck(chars.baseAddress!, chars.count)
            }
        }
        return JSON(owning: made!)
    }

    /// Sets an object member (no-op on non-objects).
    package func set(_ key: String, _ value: JSON) {
        json_object_set(raw, key, value.raw)
    }

    package func append(_ value: JSON) {
        json_array_append(raw, value.raw)
    }

    /// A deep copy, safe to mutate independently.
    package func deepCopy() -> JSON { JSON(owning: json_deep_copy(raw)) }

    /// Structural equality (jansson's json_equal).
    package func isEqual(to other: JSON) -> Bool { json_equal(raw, other.raw) != 0 }
}
