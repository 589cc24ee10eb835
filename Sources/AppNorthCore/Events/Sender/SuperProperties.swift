/// The super properties as a value: the members of one JSON object, each
/// kept as its text (`"key":value`, the value spelled as the host wrote
/// it), in the order registered. Pure: registering, removing and merging
/// into an event's properties make new text; the file and the sharing are
/// `SuperPropertiesFile`'s, the copy `track` reads is `EventSender`'s.
package struct SuperProperties: Sendable, Equatable {
    struct Member: Sendable, Equatable {
        /// The key, unescaped, as UTF-8.
        let key: [UInt8]
        /// `"key":value` as written.
        let text: [UInt8]
    }

    private(set) var members: [Member] = []

    /// Keys an event's envelope uses (docs/events.md, "Wire format"): a
    /// backend that flattens properties into the event would confuse them.
    static let reservedKeys: Set<[UInt8]> = Set(["id", "name", "timestamp", "anonymous_id", "user_id", "session_id",
                                                 "properties"].map { Array($0.utf8) })

    init() {}

    var isEmpty: Bool { members.isEmpty }

    /// The object's text, `{...}`.
    var text: [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (i, m) in members.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += m.text
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The members of `object`, text a validator accepted as a JSON
    /// object; nil when it is not one (or a key's escape is malformed).
    static func members(of object: UnsafeBufferPointer<UInt8>) -> [Member]? {
        var walker = JSONMemberWalker(object)
        var out: [Member] = []
        while let m = walker.next() {
            guard let key = m.keyEscaped ? JSONText.unescaped(object, m.key).map({ Array($0.utf8) })
                                         : Array(object[m.key]) else { return nil }
            // From the key's opening quote to the value's end, whitespace around the colon dropped.
            var text = Array(object[(m.key.lowerBound - 1)..<(m.key.upperBound + 1)])
            text.append(UInt8(ascii: ":"))
            text += object[m.value]
            out.append(Member(key: key, text: text))
        }
        return walker.malformed ? nil : out
    }

    /// Parses stored text; nil when damaged.
    static func parse(_ bytes: [UInt8]) -> SuperProperties? {
        bytes.withUnsafeBufferPointer { buffer in
            guard (try? JSONValidator.validate(buffer, integersAsReals: true,
                                               maxNesting: EventTracker.maxPropertiesNesting)) == .object,
                  let members = members(of: buffer) else { return nil }
            var out = SuperProperties()
            for m in members { out.set(m, overwrite: true) }
            return out
        }
    }

    /// Sets a member: replaces the one with its key (keeping its place)
    /// unless `overwrite` is false, else appends it.
    mutating func set(_ member: Member, overwrite: Bool) {
        if let i = members.firstIndex(where: { $0.key == member.key }) {
            if overwrite { members[i] = member }
        } else {
            members.append(member)
        }
    }

    /// Removes the member with this key; false when there was none.
    mutating func remove(_ key: [UInt8]) -> Bool {
        guard let i = members.firstIndex(where: { $0.key == key }) else { return false }
        members.remove(at: i)
        return true
    }

    /// An event's properties with these merged in: every member whose key
    /// the host's properties (validated text, nil for none) do not hold,
    /// then the host's members as written. A property passed to `track`
    /// wins. One walk of the host's members; no allocation but the result's.
    func merged(into host: UnsafeBufferPointer<UInt8>?) -> [UInt8] {
        guard let host, let inner = Self.inner(host) else { return text }
        let overridden = overriddenMembers(by: host)
        var out: [UInt8] = []
        out.reserveCapacity(host.count + members.reduce(2) { $0 + $1.text.count + 1 })
        out.append(UInt8(ascii: "{"))
        for (i, m) in members.enumerated() {
            if i < 64 ? overridden & (1 << UInt64(i)) != 0 : Self.holds(host, m.key) { continue }
            out += m.text
            out.append(UInt8(ascii: ","))
        }
        out += host[inner]
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// Bit i set: the host's properties hold the key of member i (the
    /// first 64; `holds` answers for the rest).
    private func overriddenMembers(by host: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var mask: UInt64 = 0
        var walker = JSONMemberWalker(host)
        while let m = walker.next() {
            for (i, member) in members.prefix(64).enumerated() where Self.keyMatches(host, m, member.key) {
                mask |= 1 << UInt64(i)
            }
        }
        return mask
    }

    /// The range between an object's braces, whitespace trimmed; nil for
    /// an object with no member.
    private static func inner(_ object: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var start = 0, end = object.count
        while start < end, JSONText.isSpace(object[start]) { start += 1 }
        while end > start, JSONText.isSpace(object[end - 1]) { end -= 1 }
        start += 1
        end -= 1
        while start < end, JSONText.isSpace(object[start]) { start += 1 }
        while end > start, JSONText.isSpace(object[end - 1]) { end -= 1 }
        return start < end ? start..<end : nil
    }

    /// Whether the object holds a member with this (unescaped) key.
    private static func holds(_ object: UnsafeBufferPointer<UInt8>, _ key: [UInt8]) -> Bool {
        var walker = JSONMemberWalker(object)
        while let m = walker.next() {
            if keyMatches(object, m, key) { return true }
        }
        return false
    }

    private static func keyMatches(_ object: UnsafeBufferPointer<UInt8>, _ m: JSONMemberWalker.Member, _ key: [UInt8]) -> Bool {
        if m.keyEscaped { return JSONText.unescaped(object, m.key).map { Array($0.utf8) == key } ?? false }
        guard m.key.count == key.count else { return false }
        return object[m.key].elementsEqual(key)
    }
}
