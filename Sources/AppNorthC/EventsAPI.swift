import AppNorthCore
import CAppNorthAPI
import Glibc

// appnorth_events_options_* and appnorth_events_*.

final class EventsOptionsBox {
    var client: AppNorthClient?
    var dataDir: String?
    var options = AppNorthEventsOptions()
    var secureStore: HostSecureStore?
    var clock: any AppNorthClock = SystemClock()
}

/// The host's before_send hook: its C function, user_data and release.
final class HostBeforeSend: @unchecked Sendable {
    // @unchecked: the hook runs on the threads that call track(), as the header says.
    let fn: appnorth_before_send_fn
    let releaseFn: appnorth_release_fn?
    let userData: UnsafeMutableRawPointer?

    init(fn: appnorth_before_send_fn, release: appnorth_release_fn?, userData: UnsafeMutableRawPointer?) {
        self.fn = fn
        releaseFn = release
        self.userData = userData
    }

    deinit { ThreadCalls.callback { releaseFn?(userData) } }

    /// The decision for an event (its text followed by a NUL byte).
    func decide(_ event: UnsafeBufferPointer<UInt8>) -> BeforeSendHook.Decision {
        let buffer = LoadBuffer()
        let text = UnsafeRawPointer(event.baseAddress!).assumingMemoryBound(to: CChar.self)
        let rc = Handle.lend(buffer, refused: Int32(-1)) { handle in fn(userData, text, handle) }
        switch rc {
        case Int32(APPNORTH_BEFORE_SEND_KEEP): return .keep
        case Int32(APPNORTH_BEFORE_SEND_DROP): return .drop
        case Int32(APPNORTH_BEFORE_SEND_REPLACE):
            guard let bytes = buffer.bytes else { return .failed("it returned APPNORTH_BEFORE_SEND_REPLACE with no replacement") }
            return .replace(bytes)
        default:
            let reason = buffer.bytes.map { ": " + Text.escapingControls(String(decoding: $0.prefix(512), as: UTF8.self)) } ?? ""
            return .failed("it returned \(rc)\(reason)")
        }
    }
}

/// Identity values through the host's get/set callbacks.
final class HostSecureStore: AppNorthSecureStore, @unchecked Sendable {
    // @unchecked: the host promises its callbacks work from any thread.
    let getFn: appnorth_secure_get_fn
    let setFn: appnorth_secure_set_fn
    let releaseFn: appnorth_release_fn?
    let userData: UnsafeMutableRawPointer?

    init(get: appnorth_secure_get_fn, set: appnorth_secure_set_fn, release: appnorth_release_fn?,
         userData: UnsafeMutableRawPointer?) {
        getFn = get
        setFn = set
        releaseFn = release
        self.userData = userData
    }

    deinit { ThreadCalls.callback { releaseFn?(userData) } }

    func read(_ key: String) throws -> String? {
        let buffer = LoadBuffer()
        let rc = Handle.lend(buffer, refused: -1) { handle in key.withCString { getFn(userData, $0, handle) } }
        guard rc == 0 else { throw AppNorthError.storage("the host secure store get callback returned \(rc)") }
        guard let bytes = buffer.bytes else { return nil }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AppNorthError.storage("the host secure store returned invalid UTF-8")
        }
        return text
    }

    func write(_ key: String, _ value: String?) throws {
        let rc: Int32 = ThreadCalls.callback(refused: -1) {
            key.withCString { k in
                if let value { return value.withCString { setFn(userData, k, $0) } }
                return setFn(userData, k, nil)
            }
        }
        guard rc == 0 else { throw AppNorthError.storage("the host secure store set callback returned \(rc)") }
    }
}

@c @implementation
public func appnorth_events_options_new() -> OpaquePointer? {
    Handle.make(EventsOptionsBox())
}

@c @implementation
public func appnorth_events_options_free(_ options: OpaquePointer?) {
    Handle.release(options, as: EventsOptionsBox.self)
}

private func withOptions(_ options: OpaquePointer?, _ err: ErrorOut?, _ body: (EventsOptionsBox) throws -> Void) -> Int32 {
    guarded(err) { try body(try Handle.get(options, as: EventsOptionsBox.self, "options")) }
}

@c @implementation
public func appnorth_events_options_set_client(_ options: OpaquePointer?, _ client: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { $0.client = try Handle.get(client, as: AppNorthClient.self, "client") }
}

@c @implementation
public func appnorth_events_options_set_data_dir(_ options: OpaquePointer?, _ dataDir: UnsafePointer<CChar>?,
                                                 _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        let path = try requiredString(dataDir, "data_dir")
        guard !path.isEmpty else { throw AppNorthError.invalidArgument("data_dir is empty") }
        box.dataDir = path
    }
}

@c @implementation
public func appnorth_events_options_set_flush_policy(_ options: OpaquePointer?, _ intervalMs: Int32, _ threshold: Int32,
                                                     _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        var o = box.options
        o.flushIntervalMilliseconds = Int(intervalMs)
        o.batchThreshold = Int(threshold)
        try o.validate()
        box.options = o
    }
}

@c @implementation
public func appnorth_events_options_set_limits(_ options: OpaquePointer?, _ maxEvents: Int32, _ maxBytes: Int64,
                                               _ maxEventBytes: Int32, _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        var o = box.options
        o.maxQueuedEvents = Int(maxEvents)
        o.maxQueuedBytes = Int(maxBytes)
        o.maxEventBytes = Int(maxEventBytes)
        try o.validate()
        box.options = o
    }
}

@c @implementation
public func appnorth_events_options_set_retry(_ options: OpaquePointer?, _ baseMs: Int32, _ retries: Int32,
                                              _ retryAfterCapMs: Int32, _ breakerThreshold: Int32,
                                              _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        var o = box.options
        o.retry.baseMilliseconds = Int(baseMs)
        o.retry.retries = Int(retries)
        guard retryAfterCapMs >= 0 else { throw AppNorthError.invalidArgument("retry_after_cap_ms must be 0 or more") }
        o.retryAfterCapMilliseconds = Int(retryAfterCapMs)
        o.breakerThreshold = Int(breakerThreshold)
        try o.validate()
        box.options = o
    }
}

@c @implementation
public func appnorth_events_options_set_retry_jitter(_ options: OpaquePointer?, _ percent: Int32,
                                                     _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        box.options.retry.jitter = try jitterFraction(percent)
    }
}

@c @implementation
public func appnorth_events_options_set_sample_rate(_ options: OpaquePointer?, _ sampleRate: Double,
                                                    _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        var o = box.options
        o.sampleRate = sampleRate
        try o.validate()
        box.options = o
    }
}

@c @implementation
public func appnorth_events_options_set_remote_settings(_ options: OpaquePointer?, _ follow: Int32,
                                                        _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        box.options.followsRemoteSettings = try flag(follow, "follow")
    }
}

@c @implementation
public func appnorth_events_options_set_require_consent(_ options: OpaquePointer?, _ require: Int32,
                                                        _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        box.options.requireConsent = try flag(require, "require")
    }
}

@c @implementation
public func appnorth_events_options_set_secure_store(_ options: OpaquePointer?, _ get: appnorth_secure_get_fn?,
                                                     _ set: appnorth_secure_set_fn?, _ release: appnorth_release_fn?,
                                                     _ userData: UnsafeMutableRawPointer?, _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        box.secureStore = HostSecureStore(get: try required(get, "get"), set: try required(set, "set"),
                                          release: release, userData: userData)
    }
}

@c @implementation
public func appnorth_events_options_set_session_policy(_ options: OpaquePointer?, _ idleMs: Int32, _ maxMs: Int32,
                                                       _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        let policy = SessionPolicy(idleMilliseconds: Int(idleMs), maxMilliseconds: Int(maxMs))
        try policy.validate()
        box.options.session = policy
    }
}

@c @implementation
public func appnorth_events_options_set_before_send(_ options: OpaquePointer?, _ fn: appnorth_before_send_fn?,
                                                    _ userData: UnsafeMutableRawPointer?, _ release: appnorth_release_fn?,
                                                    _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { box in
        guard let fn else {
            box.options.beforeSend = nil
            return
        }
        let host = HostBeforeSend(fn: fn, release: release, userData: userData)
        box.options.beforeSend = BeforeSendHook { host.decide($0) }
    }
}

@c @implementation
public func appnorth_events_options_set_clock(_ options: OpaquePointer?, _ clock: OpaquePointer?,
                                              _ err: ErrorOut?) -> Int32 {
    withOptions(options, err) { $0.clock = try clockArgument(clock) }
}

@c @implementation
public func appnorth_events_new(_ options: OpaquePointer?, _ outEvents: UnsafeMutablePointer<OpaquePointer?>?,
                                _ err: ErrorOut?) -> Int32 {
    outEvents?.pointee = nil
    return guarded(err) {
        let out = try required(outEvents, "out_events")
        let box = try Handle.get(options, as: EventsOptionsBox.self, "options")
        guard let client = box.client else { throw AppNorthError.invalidArgument("options have no client") }
        guard let dataDir = box.dataDir else { throw AppNorthError.invalidArgument("options have no data directory") }
        let events = try AppNorthEvents(client: client, directory: DataDirectory(path: dataDir), options: box.options,
                                        secureStore: box.secureStore, clock: box.clock)
        out.pointee = Handle.make(events)
        ThreadOwners.register(events) { [weak events] in
            guard let events else { return }
            OperationTable.shared.cancelAll(of: events)
            events.requestStop()
        }
    }
}

@c @implementation
public func appnorth_events_free(_ events: OpaquePointer?) {
    // Stop the upload thread now, whatever other references exist; calls
    // waiting on it (a flush) then return.
    Handle.release(events, as: AppNorthEvents.self) {
        ThreadOwners.unregister($0)
        cancelOperations(of: $0)
        $0.close(timeoutMilliseconds: 0)
    }
}

private func withEvents(_ events: OpaquePointer?, _ err: ErrorOut?, _ body: (AppNorthEvents) throws -> Void) -> Int32 {
    guarded(err) { try Handle.borrow(events, as: AppNorthEvents.self, "events", body) }
}

@c @implementation
public func appnorth_events_close(_ events: OpaquePointer?, _ timeoutMs: Int32, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        guard timeoutMs >= 0 else { throw AppNorthError.invalidArgument("timeout_ms must be 0 or more") }
        events.close(timeoutMilliseconds: Int(timeoutMs))
    }
}

@c @implementation
public func appnorth_events_track(_ events: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ properties: UnsafePointer<CChar>?,
                                  _ outQueued: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    setOut(outQueued, 0)
    return withEvents(events, err) { events in
        // The bytes as they are, checked where they lie (no String is made:
        // the core checks UTF-8 as it validates the JSON).
        let maxBytes = events.options.maxEventBytes
        var propertiesBytes: UnsafeBufferPointer<UInt8>?
        if let properties {
            let length = strnlen(properties, maxBytes + 1)
            guard length <= maxBytes else { throw AppNorthError.tooLarge("properties_json is longer than \(maxBytes) bytes") }
            propertiesBytes = UnsafeBufferPointer(start: UnsafeRawPointer(properties).assumingMemoryBound(to: UInt8.self),
                                                  count: length)
        }
        guard let name else {
            // Decoded first before: bad UTF-8 there is what the host heard of.
            if let properties { _ = try Text.decodeC(properties, what: "properties_json") }
            throw AppNorthError.invalidArgument("name is NULL")
        }
        let nameBytes = UnsafeBufferPointer(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name))
        let queued = try events.track(utf8: nameBytes, properties: propertiesBytes, unchecked: ("name", "properties_json"))
        setOut(outQueued, queued ? 1 : 0)
    }
}

@c @implementation
public func appnorth_events_flush(_ events: OpaquePointer?, _ timeoutMs: Int32, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        guard timeoutMs >= 0 else { throw AppNorthError.invalidArgument("timeout_ms must be 0 or more") }
        try events.flush(timeoutMilliseconds: Int(timeoutMs))
    }
}

@c @implementation
public func appnorth_events_flush_sent(_ events: OpaquePointer?, _ timeoutMs: Int32, _ outSent: UnsafeMutablePointer<Int64>?,
                                       _ err: ErrorOut?) -> Int32 {
    outSent?.pointee = 0
    return withEvents(events, err) { events in
        guard timeoutMs >= 0 else { throw AppNorthError.invalidArgument("timeout_ms must be 0 or more") }
        let before = events.deliveredCount
        // On failure too: the host learns what went out before it.
        defer { outSent?.pointee = Int64(max(0, events.deliveredCount &- before)) }
        try events.flush(timeoutMilliseconds: Int(timeoutMs))
    }
}

@c @implementation
public func appnorth_events_set_network_type(_ events: OpaquePointer?, _ type: Int32, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        guard let network = NetworkType(rawValue: type) else {
            throw AppNorthError.invalidArgument("network_type must be one of APPNORTH_NETWORK_*")
        }
        try events.setNetworkType(network)
    }
}

@c @implementation
public func appnorth_events_start_session(_ events: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.startSession() }
}

@c @implementation
public func appnorth_events_session_id(_ events: OpaquePointer?, _ outID: OutString?, _ err: ErrorOut?) -> Int32 {
    outID?.pointee = nil
    return withEvents(events, err) { events in try returnString(outID, "out_id") { try events.sessionID } }
}

@c @implementation
public func appnorth_events_foreground(_ events: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.foreground() }
}

@c @implementation
public func appnorth_events_set_consent(_ events: OpaquePointer?, _ granted: Int32, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        // Only the two documented values: a stray 7 is a host bug, not a grant.
        guard granted == 0 || granted == 1 else {
            throw AppNorthError.invalidArgument("granted must be 0 (revoke) or 1 (grant), not \(granted)")
        }
        try events.setConsent(analytics: granted == 1)
    }
}

@c @implementation
public func appnorth_events_consent(_ events: OpaquePointer?, _ outState: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        try required(outState, "out_state").pointee = events.consent.rawValue
    }
}

@c @implementation
public func appnorth_events_identify(_ events: OpaquePointer?, _ userID: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.identify(userID: try requiredString(userID, "user_id")) }
}

@c @implementation
public func appnorth_events_reset(_ events: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.reset() }
}

@c @implementation
public func appnorth_events_set_push_token(_ events: OpaquePointer?, _ token: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.setPushToken(try optionalString(token, "token")) }
}

@c @implementation
public func appnorth_events_register(_ events: OpaquePointer?, _ json: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    registerSuperProperties(events, json, once: false, err)
}

@c @implementation
public func appnorth_events_register_once(_ events: OpaquePointer?, _ json: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    registerSuperProperties(events, json, once: true, err)
}

private func registerSuperProperties(_ events: OpaquePointer?, _ json: UnsafePointer<CChar>?, once: Bool,
                                     _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { events in
        let json = try required(json, "properties_json")
        let maxBytes = events.options.maxEventBytes
        let length = strnlen(json, maxBytes + 1)
        guard length <= maxBytes else { throw AppNorthError.tooLarge("properties_json is longer than \(maxBytes) bytes") }
        try events.register(UnsafeBufferPointer(start: UnsafeRawPointer(json).assumingMemoryBound(to: UInt8.self),
                                                count: length), once: once)
    }
}

@c @implementation
public func appnorth_events_unregister(_ events: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    withEvents(events, err) { try $0.unregister(try requiredString(key, "key")) }
}

@c @implementation
public func appnorth_events_super_properties(_ events: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return withEvents(events, err) { events in try returnString(outJSON, "out_json") { try events.superPropertiesJSON() } }
}

@c @implementation
public func appnorth_events_anonymous_id(_ events: OpaquePointer?, _ outID: OutString?, _ err: ErrorOut?) -> Int32 {
    outID?.pointee = nil
    return withEvents(events, err) { events in try returnString(outID, "out_id") { events.anonymousID } }
}

@c @implementation
public func appnorth_events_stats(_ events: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return withEvents(events, err) { events in try returnString(outJSON, "out_json") { events.statsJSON() } }
}
