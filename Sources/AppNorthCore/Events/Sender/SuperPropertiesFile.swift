/// The super properties of a data directory: `super_properties.json`
/// (0600, one JSON object), so they survive a restart and every handle on
/// the directory, in any process, merges the same ones. A change
/// (register, unregister, reset) reads the file again under its writer
/// turn and replaces it whole (`DataDirectory.withFileLock`,
/// `replaceWhole`), then moves the shared counter in `consent.watch`
/// (`ConsentWatch.superPropertiesChanges`). `track` reads no file while
/// that counter stays where it last saw it: one load per event; it reads
/// the file once after each change (`EventSender.superProperties`).
final class SuperPropertiesFile: Sendable {
    static let fileName = "super_properties.json"
    private static let lockName = fileName + ".lock"
    let directory: DataDirectory
    let watch: ConsentWatch
    /// The largest registered set, as text: half the largest event, so an
    /// event with all of them still has room for its own properties.
    let maxBytes: Int
    let logger: Logger

    init(directory: DataDirectory, watch: ConsentWatch, maxEventBytes: Int, logger: Logger) {
        self.directory = directory
        self.watch = watch
        maxBytes = maxEventBytes / 2
        self.logger = logger
    }

    /// The change counter, read before the file is.
    var changes: UInt64 { watch.superPropertiesChanges }

    /// What the file holds: none when it is missing; a damaged file (not
    /// a JSON object, too deep) reads as none, logged, and the next
    /// change replaces it.
    func read() -> SuperProperties {
        let bytes: [UInt8]?
        do throws(AppNorthError) {
            bytes = try directory.readWhole(Self.fileName)
        } catch {
            logger.log(.error, "events: super properties unreadable, none are added to events: \(error.message)")
            return SuperProperties()
        }
        guard let bytes else { return SuperProperties() }
        guard let parsed = SuperProperties.parse(bytes) else {
            logger.log(.error, "events: \(directory.file(Self.fileName)) is damaged (not a JSON object); no super properties are added until the next register")
            return SuperProperties()
        }
        return parsed
    }

    /// Changes the stored set under the writer turn; returns it as stored.
    /// Refuses (and stores nothing) a set over `maxBytes`.
    func change(_ body: (inout SuperProperties) throws(AppNorthError) -> Void) throws(AppNorthError) -> SuperProperties {
        let stored = try directory.withFileLock(Self.lockName) { () throws(AppNorthError) -> SuperProperties in
            var value = read()
            let before = value
            try body(&value)
            guard value != before else { return value }
            let text = value.text
            guard text.count <= maxBytes else {
                throw .tooLarge("super properties would be \(text.count) bytes; the limit is \(maxBytes) (half of max_event_bytes)")
            }
            if value.isEmpty {
                directory.remove(Self.fileName)
            } else {
                try directory.replaceWhole(Self.fileName, with: text, what: "super properties file")
            }
            watch.announceSuperPropertiesChange()
            return value
        }
        return stored
    }

    /// The members of a host's object for `register`: a JSON object (at
    /// most 32 deep, as event properties), no reserved key.
    static func members(of object: UnsafeBufferPointer<UInt8>) throws(AppNorthError) -> [SuperProperties.Member] {
        let top: JSONValidator.TopLevel
        do {
            top = try JSONValidator.validate(object, what: "properties_json", integersAsReals: true,
                                             maxNesting: EventTracker.maxPropertiesNesting)
        } catch {
            // Bad UTF-8 is what the host hears of first, as at track().
            if !JSONValidator.isValidUTF8(object) { throw .invalidUTF8("properties_json is not valid UTF-8") }
            throw error
        }
        guard top == .object, let members = SuperProperties.members(of: object) else {
            throw .invalidJSON("properties_json must be a JSON object", position: 0)
        }
        for m in members where SuperProperties.reservedKeys.contains(m.key) {
            throw .invalidArgument("\"\(String(decoding: m.key, as: UTF8.self))\" is reserved (an event field); "
                                   + "reserved: anonymous_id, id, name, properties, session_id, timestamp, user_id")
        }
        return members
    }
}
