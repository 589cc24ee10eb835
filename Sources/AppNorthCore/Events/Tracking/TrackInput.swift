/// What `EventTracker.append` writes into a stripe's buffer; returns its size.
protocol JournalEvent: Sendable {
    func write(into s: inout JournalStripe.State, timestampMs: Int64) throws(AppNorthError) -> Int
}

/// The checks `track` makes of the host's text before anything else, on
/// its bytes: the name (1 to 256 characters), the properties (at most the
/// event limit, a JSON object nested at most `maxPropertiesNesting` deep:
/// `JSONValidator`, which also holds them to UTF-8) and, for C strings,
/// the name's UTF-8.
enum TrackInput {
    static let maxNameCharacters = 256

    /// The host's text as `track` got it, for the body run under the
    /// stripe's lock. Sendable because it only lives for that call, on its
    /// thread: the bytes are the caller's until `track` returns.
    struct Text: @unchecked Sendable, JournalEvent {
        let name: UnsafeBufferPointer<UInt8>
        let properties: UnsafeBufferPointer<UInt8>?

        @inline(__always)
        func write(into s: inout JournalStripe.State, timestampMs: Int64) throws(AppNorthError) -> Int {
            try EventTracker.writeEvent(into: &s, self, timestampMs: timestampMs)
        }
    }

    /// `unchecked`: the arguments' names when the bytes come from C. A
    /// properties text that is not UTF-8 is then refused as that before
    /// anything else, as when the C entry decoded it first.
    static func check(name: UnsafeBufferPointer<UInt8>, properties: UnsafeBufferPointer<UInt8>?,
                      unchecked: (name: String, properties: String)?, maxEventBytes: Int) throws(AppNorthError) {
        if let unchecked, !isASCII(name) && !JSONValidator.isValidUTF8(name) {
            throw refusal(.invalidUTF8("\(unchecked.name) is not valid UTF-8"), properties, unchecked)
        }
        // At most 256 bytes is at most 256 characters: count them only past that.
        guard name.count > 0 && (name.count <= maxNameCharacters || characters(name) <= maxNameCharacters) else {
            throw refusal(.invalidArgument("event name must be 1 to \(maxNameCharacters) characters"), properties, unchecked)
        }
        guard let properties else { return }
        // Measured before parsing: the event that carries them can only be larger.
        guard properties.count <= maxEventBytes else {
            throw refusal(.tooLarge("event properties are \(properties.count) bytes; the limit is \(maxEventBytes)"),
                          properties, unchecked)
        }
        let top: JSONValidator.TopLevel
        do {
            top = try JSONValidator.validate(properties, what: "event properties", integersAsReals: true,
                                             maxNesting: EventTracker.maxPropertiesNesting)
        } catch {
            throw refusal(error, properties, unchecked)
        }
        guard top == .object else { throw .invalidJSON("event properties must be a JSON object", position: 0) }
    }

    private static func refusal(_ error: AppNorthError, _ properties: UnsafeBufferPointer<UInt8>?,
                                _ unchecked: (name: String, properties: String)?) -> AppNorthError {
        guard let unchecked, let properties, !JSONValidator.isValidUTF8(properties) else { return error }
        return .invalidUTF8("\(unchecked.properties) is not valid UTF-8")
    }

    /// No byte above 0x7F, eight at a time.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var i = 0
        var high: UInt64 = 0
        while bytes.count - i >= 8 {
            high |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(base[i])
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// Characters (Unicode scalars) of well-formed UTF-8: the bytes that
    /// are not continuation bytes.
    private static func characters(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var count = 0
        for byte in bytes where byte & 0xC0 != 0x80 { count += 1 }
        return count
    }
}
