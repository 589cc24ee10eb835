import AppNorthCore
import CAppNorthAPI

// appnorth_config_options_* and appnorth_config_*: remote config.

/// The mutable options object behind appnorth_config_options. Not
/// thread-safe, as the header says.
final class ConfigOptions {
    var client: AppNorthClient?
    var options = AppNorthRemoteConfig.Options()
}

@c @implementation
public func appnorth_config_options_new() -> OpaquePointer? {
    Handle.make(ConfigOptions())
}

@c @implementation
public func appnorth_config_options_free(_ options: OpaquePointer?) {
    Handle.release(options, as: ConfigOptions.self)
}

@c @implementation
public func appnorth_config_options_set_client(_ options: OpaquePointer?, _ client: OpaquePointer?,
                                               _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        opts.client = try Handle.get(client, as: AppNorthClient.self, "client")
    }
}

/// An optional path argument: NULL clears it, "" is refused.
private func optionalPath(_ pointer: UnsafePointer<CChar>?, _ name: String) throws -> String? {
    guard let path = try optionalString(pointer, name) else { return nil }
    guard !path.isEmpty else { throw AppNorthError.invalidArgument("\(name) is empty (pass NULL for none)") }
    return path
}

@c @implementation
public func appnorth_config_options_set_data_dir(_ options: OpaquePointer?, _ dataDir: UnsafePointer<CChar>?,
                                                 _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        opts.options.dataDirectory = try optionalPath(dataDir, "data_dir")
    }
}

@c @implementation
public func appnorth_config_options_set_bundled_path(_ options: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                                                     _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        let bundled = try optionalPath(path, "path")
        // Checked now, so the host hears about a bad file at once; on
        // failure no bundled file is set and the config opens without it.
        if let bundled { try AppNorthRemoteConfig.checkBundledFile(path: bundled) }
        opts.options.bundledPath = bundled
    }
}

@c @implementation
public func appnorth_config_options_set_ttl_seconds(_ options: OpaquePointer?, _ ttlSeconds: Int32,
                                                    _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        guard ttlSeconds == 0 || Limits.ttlSeconds.contains(Int(ttlSeconds)) else {
            throw AppNorthError.invalidArgument("ttl_seconds must be 0 (default) or \(Limits.spelled(Limits.ttlSeconds))")
        }
        opts.options.ttlSeconds = ttlSeconds == 0 ? AppNorthRemoteConfig.defaultTTLSeconds : Int(ttlSeconds)
    }
}

@c @implementation
public func appnorth_config_options_set_clock(_ options: OpaquePointer?, _ clock: OpaquePointer?,
                                              _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        opts.options.clock = try clockArgument(clock)
    }
}

@c @implementation
public func appnorth_config_options_set_poll_interval_ms(_ options: OpaquePointer?, _ pollIntervalMs: Int32,
                                                         _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        guard pollIntervalMs == 0 || Limits.pollIntervalMilliseconds.contains(Int(pollIntervalMs)) else {
            throw AppNorthError.invalidArgument(
                "poll_interval_ms must be 0 (default) or \(Limits.spelled(Limits.pollIntervalMilliseconds))")
        }
        opts.options.pollIntervalMilliseconds =
            pollIntervalMs == 0 ? AppNorthRemoteConfig.defaultPollIntervalMilliseconds : Int(pollIntervalMs)
    }
}

@c @implementation
public func appnorth_config_options_set_reconnect_backoff_ms(_ options: OpaquePointer?, _ baseMs: Int32,
                                                             _ maxMs: Int32, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        let base = baseMs == 0 ? Backoff.default.baseMilliseconds : Int(baseMs)
        let max = maxMs == 0 ? Backoff.default.maxMilliseconds : Int(maxMs)
        guard base >= 1, base <= max, max <= Limits.backoffMaxMilliseconds else {
            throw AppNorthError.invalidArgument(
                "backoff must satisfy 1 <= base_ms <= max_ms <= \(Limits.backoffMaxMilliseconds) (0 for defaults)")
        }
        opts.options.reconnectBackoff = Backoff(baseMilliseconds: base, maxMilliseconds: max,
                                                jitter: opts.options.reconnectBackoff.jitter)
    }
}

@c @implementation
public func appnorth_config_options_set_reconnect_jitter(_ options: OpaquePointer?, _ percent: Int32,
                                                         _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        opts.options.reconnectBackoff.jitter = try jitterFraction(percent)
    }
}

@c @implementation
public func appnorth_config_options_set_logger(_ options: OpaquePointer?, _ fn: appnorth_log_fn?, _ minLevel: Int32,
                                               _ userData: UnsafeMutableRawPointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        opts.options.logger = try hostLogger(fn, minLevel, userData)
    }
}

@c @implementation
public func appnorth_config_new(_ options: OpaquePointer?, _ outConfig: UnsafeMutablePointer<OpaquePointer?>?,
                                _ err: ErrorOut?) -> Int32 {
    outConfig?.pointee = nil
    return guarded(err) {
        let out = try required(outConfig, "out_config")
        let opts = try Handle.get(options, as: ConfigOptions.self, "options")
        guard let client = opts.client else { throw AppNorthError.invalidArgument("options have no client") }
        let config = try AppNorthRemoteConfig(client: client, options: opts.options)
        out.pointee = Handle.make(config)
        // appnorth_shutdown(): its stream is cancelled (the thread is told
        // to stop with every library thread).
        ThreadOwners.register(config) { [weak config] in
            guard let config else { return }
            OperationTable.shared.cancelAll(of: config)
            config.cancelStream()
        }
    }
}

@c @implementation
public func appnorth_config_free(_ config: OpaquePointer?) {
    // Stop the thread and the listeners first: the handle's reference may
    // not be the last one while a callback is on the stack.
    Handle.release(config, as: AppNorthRemoteConfig.self) {
        ThreadOwners.unregister($0)
        cancelOperations(of: $0)
        $0.close()
    }
}

@c @implementation
public func appnorth_config_get_string(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?,
                                       _ defaultValue: UnsafePointer<CChar>?, _ outValue: OutString?,
                                       _ err: ErrorOut?) -> Int32 {
    outValue?.pointee = nil
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let key = try requiredString(key, "key")
        let fallback = try optionalString(defaultValue, "default_value")
        _ = try required(outValue, "out_value")
        try returnOptionalString(outValue, config.string(key, default: fallback))
    }
}

@c @implementation
public func appnorth_config_get_int(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ defaultValue: Int64,
                                    _ outValue: UnsafeMutablePointer<Int64>?, _ err: ErrorOut?) -> Int32 {
    outValue?.pointee = defaultValue
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let key = try requiredString(key, "key")
        let out = try required(outValue, "out_value")
        out.pointee = config.integer(key, default: defaultValue)
    }
}

@c @implementation
public func appnorth_config_get_double(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ defaultValue: Double,
                                       _ outValue: UnsafeMutablePointer<Double>?, _ err: ErrorOut?) -> Int32 {
    outValue?.pointee = defaultValue
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let key = try requiredString(key, "key")
        let out = try required(outValue, "out_value")
        out.pointee = config.double(key, default: defaultValue)
    }
}

@c @implementation
public func appnorth_config_get_bool(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ defaultValue: Int32,
                                     _ outValue: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    outValue?.pointee = defaultValue
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let key = try requiredString(key, "key")
        let out = try required(outValue, "out_value")
        switch config.resolved.document.value(key) {
        case .bool(let value)?: out.pointee = value ? 1 : 0
        default: out.pointee = defaultValue
        }
    }
}

@c @implementation
public func appnorth_config_get_json(_ config: OpaquePointer?, _ key: UnsafePointer<CChar>?,
                                     _ defaultJSON: UnsafePointer<CChar>?, _ outJSON: OutString?,
                                     _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let key = try requiredString(key, "key")
        let fallback = try optionalString(defaultJSON, "default_json")
        if let fallback { try JSON.validate(fallback, what: "default_json") }
        _ = try required(outJSON, "out_json")
        try returnOptionalString(outJSON, config.json(key, default: fallback))
    }
}

@c @implementation
public func appnorth_config_snapshot(_ config: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        try returnString(outJSON, "out_json") { config.snapshot() }
    }
}

@c @implementation
public func appnorth_config_source(_ config: OpaquePointer?, _ outTier: UnsafeMutablePointer<Int32>?,
                                   _ outFetchedMs: UnsafeMutablePointer<Int64>?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let source = config.source
        outTier?.pointee = source.tier.rawValue
        outFetchedMs?.pointee = source.fetchedWallMilliseconds
    }
}

@c @implementation
public func appnorth_config_refresh(_ config: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        // A listener may free the handle during the refresh: hold our own
        // reference until it returns.
        try withExtendedLifetime(config) { try config.refresh() }
    }
}

@c @implementation
public func appnorth_config_start_live(_ config: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        try Handle.get(config, as: AppNorthRemoteConfig.self, "config").startLiveUpdates()
    }
}

@c @implementation
public func appnorth_config_stop_live(_ config: OpaquePointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        try Handle.get(config, as: AppNorthRemoteConfig.self, "config").stopLiveUpdates()
    }
}

@c @implementation
public func appnorth_config_add_listener(_ config: OpaquePointer?, _ fn: appnorth_config_listener_fn?,
                                         _ userData: UnsafeMutableRawPointer?, _ outToken: UnsafeMutablePointer<Int64>?,
                                         _ err: ErrorOut?) -> Int32 {
    outToken?.pointee = 0
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let fn = try required(fn, "fn")
        let out = try required(outToken, "out_token")
        let context = HostPointer(raw: userData)
        out.pointee = try config.addListener { change in
            ThreadCalls.callback {
                change.config.withCString { json in
                    change.changedKeysJSON.withCString { keys in
                        fn(json, keys, change.tier.rawValue, context.raw)
                    }
                }
            }
        }
    }
}

@c @implementation
public func appnorth_config_remove_listener(_ config: OpaquePointer?, _ token: Int64, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        try Handle.get(config, as: AppNorthRemoteConfig.self, "config").removeListener(token)
    }
}

@c @implementation
public func appnorth_config_last_fetch_status(_ config: OpaquePointer?, _ outStatus: ErrorOut?,
                                              _ outTimeMs: UnsafeMutablePointer<Int64>?, _ err: ErrorOut?) -> Int32 {
    outTimeMs?.pointee = 0
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let out = try required(outStatus, "out_status")
        let status = config.lastFetchStatus
        if let error = status.error {
            report(out, code: error.status, httpStatus: error.httpStatus, message: error.message)
        } else {
            report(out, code: 0, httpStatus: 0, message: "")
        }
        outTimeMs?.pointee = status.wallMilliseconds
    }
}
