import Synchronization

/// The host's filter hook (`appnorth_events_options_set_before_send`): it
/// sees each event `track` assembled (name, properties with the super
/// properties merged, session id, time, ids) before anything is written,
/// on the thread that called `track`, and keeps it, drops it or replaces
/// it. The C layer makes one from a C function; the core only calls it.
package struct BeforeSendHook: Sendable {
    package enum Decision: Sendable {
        case keep
        case drop
        /// A whole event's JSON object text.
        case replace([UInt8])
        /// The hook reported an error (a status it may not return, a
        /// Python or Node exception): the event is dropped.
        case failed(String)
    }

    /// Called with the event's text, a NUL byte just past its end.
    package let call: @Sendable (UnsafeBufferPointer<UInt8>) -> Decision

    package init(_ call: @escaping @Sendable (UnsafeBufferPointer<UInt8>) -> Decision) {
        self.call = call
    }
}

/// Runs the hook for `track` and judges its answer. Fails closed: a
/// replacement that is not a valid event, or a hook error, drops the event
/// like a deliberate drop (all counted as `dropped.filtered`); failures
/// are logged once per burst (the first failure after an event the hook
/// let through, or after open), so a broken filter cannot flood the log.
final class BeforeSendFilter: Sendable {
    let hook: BeforeSendHook
    let maxEventBytes: Int
    let counters: EventCounters
    let logger: Logger
    /// A failure was logged and no event has passed since.
    private let inBurst = Atomic<Bool>(false)

    init(hook: BeforeSendHook, maxEventBytes: Int, counters: EventCounters, logger: Logger) {
        self.hook = hook
        self.maxEventBytes = maxEventBytes
        self.counters = counters
        self.logger = logger
    }

    /// The bytes to store for `event` (its text followed by a NUL byte,
    /// not counted), or nil when the event is dropped (counted).
    func filter(_ event: UnsafeBufferPointer<UInt8>, id: UnsafeRawBufferPointer) -> [UInt8]? {
        switch hook.call(event) {
        case .keep:
            passed()
            return Array(event)
        case .drop:
            counters.drop(1, .filtered)
            return nil
        case .replace(let bytes):
            if let refusal = Self.refusal(bytes, id: id, maxEventBytes: maxEventBytes) {
                return failed("its replacement was refused: \(refusal)")
            }
            passed()
            return bytes
        case .failed(let why):
            return failed(why)
        }
    }

    private func passed() {
        if inBurst.load(ordering: .relaxed) { inBurst.store(false, ordering: .relaxed) }
    }

    private func failed(_ why: String) -> [UInt8]? {
        counters.drop(1, .filtered)
        if !inBurst.exchange(true, ordering: .relaxed) {
            logger.log(.error, "events: the before_send hook failed, so the event was dropped (fails closed; "
                       + "counted in dropped.filtered; logged once until an event passes): \(why)")
        }
        return nil
    }

    /// Why a replacement is not a valid event, nil when it is: a JSON
    /// object of at most `maxEventBytes` that nests at most 33 deep (the
    /// properties' 32 and the event), that the upload would find sound
    /// (`EventSoundness`: string `id` and `name`, a timestamp in range),
    /// keeps the event's id (the server deduplicates on it), and whose
    /// `properties`, if any, is an object.
    static func refusal(_ bytes: [UInt8], id: UnsafeRawBufferPointer, maxEventBytes: Int) -> String? {
        guard bytes.count <= maxEventBytes else { return "\(bytes.count) bytes; the limit is \(maxEventBytes)" }
        return bytes.withUnsafeBufferPointer { text -> String? in
            do throws(AppNorthError) {
                guard try JSONValidator.validate(text, what: "the replacement", integersAsReals: true,
                                                 maxNesting: EventTracker.maxPropertiesNesting + 1) == .object else {
                    return "not a JSON object"
                }
            } catch {
                return error.message
            }
            guard EventSoundness.isSound(bytes) else { return "no string id and name and a timestamp in range" }
            var walker = JSONMemberWalker(text)
            var sameID = false
            while let m = walker.next() {
                let key = JSONText.unescaped(text, m.key) ?? ""
                if key == "id" {
                    let value = text[m.value]
                    sameID = value.count == id.count + 2 && value.dropFirst().prefix(id.count).elementsEqual(id)
                } else if key == "properties", text[m.value.lowerBound] != UInt8(ascii: "{") {
                    return "properties is not an object"
                }
            }
            return sameID ? nil : "the id was changed (the server deduplicates events on it)"
        }
    }
}
