import AppNorthCore
import CAppNorthAPI

// appnorth_client_options_* and appnorth_client_*.

/// The mutable options object behind appnorth_client_options. Not
/// thread-safe, as the header says.
final class ClientOptions {
    var apiURL: String?
    var appID: String?
    var credential: AppNorthCredential?
    var timeouts = HTTPTimeouts.default
    var logger = Logger.silent
    var trust = HTTPTrust()
    var compressUploads = true
    /// Dispatch mode (DispatchAPI.swift).
    var dispatchMode = false
    var cleartextHosts: [String] = []
}

@c @implementation
public func appnorth_client_options_new() -> OpaquePointer? {
    Handle.make(ClientOptions())
}

@c @implementation
public func appnorth_client_options_free(_ options: OpaquePointer?) {
    Handle.release(options, as: ClientOptions.self)
}

@c @implementation
public func appnorth_client_options_set_api_url(_ options: OpaquePointer?, _ apiURL: UnsafePointer<CChar>?,
                                                _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.apiURL = try AppNorthClientConfiguration.validatedURL(
            requiredString(apiURL, "api_url", maxBytes: AppNorthClientConfiguration.maxURLBytes))
    }
}

@c @implementation
public func appnorth_client_options_set_app_id(_ options: OpaquePointer?, _ appID: UnsafePointer<CChar>?,
                                               _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.appID = try AppNorthClientConfiguration.validatedAppID(requiredString(appID, "app_id"))
    }
}

@c @implementation
public func appnorth_client_options_set_credential(_ options: OpaquePointer?, _ email: UnsafePointer<CChar>?,
                                                   _ token: UnsafePointer<CChar>?,
                                                   _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        switch (email, token) {
        case (nil, nil):
            opts.credential = nil
        case (nil, _), (_, nil):
            throw AppNorthError.invalidArgument("email and token must both be set, or both be NULL")
        default:
            let credential = AppNorthCredential(email: try requiredString(email, "email"),
                                                token: try requiredString(token, "token"))
            try AppNorthClientConfiguration.validateCredential(email: credential.email, token: credential.token)
            opts.credential = credential
        }
    }
}

@c @implementation
public func appnorth_client_options_allow_cleartext_host(_ options: OpaquePointer?, _ host: UnsafePointer<CChar>?,
                                                         _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        let name = try Cleartext.validatedHost(requiredString(host, "host", maxBytes: Cleartext.maxHostBytes))
        guard opts.cleartextHosts.count < Limits.cleartextHosts || opts.cleartextHosts.contains(name) else {
            throw AppNorthError.invalidArgument("at most \(Limits.cleartextHosts) cleartext hosts")
        }
        if !opts.cleartextHosts.contains(name) { opts.cleartextHosts.append(name) }
    }
}

@c @implementation
public func appnorth_client_options_set_timeouts(_ options: OpaquePointer?, _ apiRequestMs: Int32,
                                                 _ resourceDownloadMs: Int32,
                                                 _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        let range = Limits.timeoutMilliseconds
        guard range.contains(Int(apiRequestMs)), range.contains(Int(resourceDownloadMs)) else {
            throw AppNorthError.invalidArgument("timeouts must be \(Limits.spelled(range)) ms")
        }
        opts.timeouts.apiRequestMilliseconds = Int(apiRequestMs)
        opts.timeouts.resourceDownloadMilliseconds = Int(resourceDownloadMs)
        opts.timeouts.connectMilliseconds = min(opts.timeouts.connectMilliseconds, Int(apiRequestMs))
    }
}

@c @implementation
public func appnorth_client_options_set_logger(_ options: OpaquePointer?, _ fn: appnorth_log_fn?,
                                               _ minLevel: Int32, _ userData: UnsafeMutableRawPointer?,
                                               _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.logger = try hostLogger(fn, minLevel, userData)
    }
}

@c @implementation
public func appnorth_client_options_set_ca_file(_ options: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                                                _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.trust.caFile = try optionalString(path, "path", maxBytes: HTTPTrust.maxTextBytes)
            .map { path throws(AppNorthError) in try HTTPTrust.validatedCAFile(path) }
    }
}

@c @implementation
public func appnorth_client_options_set_ca_pem(_ options: OpaquePointer?, _ pem: UnsafeRawPointer?, _ length: Int,
                                               _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        // size_t arrives as Int: above Int.max it is negative here.
        guard length >= 0, length <= HTTPTrust.maxCABytes else {
            throw AppNorthError.tooLarge("CA bundle is \(UInt(bitPattern: length)) bytes; the limit is \(HTTPTrust.maxCABytes)")
        }
        if pem == nil && length == 0 {
            opts.trust.caPEM = nil
            return
        }
        let bytes = Array(UnsafeRawBufferPointer(start: try required(pem, "pem"), count: length))
        opts.trust.caPEM = try HTTPTrust.validatedCAPEM(bytes)
    }
}

@c @implementation
public func appnorth_client_options_set_pinned_public_keys(_ options: OpaquePointer?, _ pins: UnsafePointer<CChar>?,
                                                           _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.trust.pinnedPublicKeys = try optionalString(pins, "pins", maxBytes: HTTPTrust.maxTextBytes)
            .map { pins throws(AppNorthError) in try HTTPTrust.validatedPins(pins) }
    }
}

@c @implementation
public func appnorth_client_options_set_proxy(_ options: OpaquePointer?, _ proxyURL: UnsafePointer<CChar>?,
                                              _ ignoreEnvironment: Int32,
                                              _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        guard ignoreEnvironment == 0 || ignoreEnvironment == 1 else {
            throw AppNorthError.invalidArgument("ignore_environment must be 0 or 1")
        }
        let url = try optionalString(proxyURL, "proxy_url", maxBytes: HTTPTrust.maxTextBytes)
            .map { url throws(AppNorthError) in try HTTPTrust.validatedProxyURL(url) }
        opts.trust.proxyURL = url
        opts.trust.ignoreProxyEnvironment = ignoreEnvironment == 1
    }
}

@c @implementation
public func appnorth_client_options_set_compression(_ options: OpaquePointer?, _ enabled: Int32,
                                                    _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        guard enabled == 0 || enabled == 1 else { throw AppNorthError.invalidArgument("enabled must be 0 or 1") }
        opts.compressUploads = enabled == 1
    }
}

@c @implementation
public func appnorth_client_set_log_level(_ client: OpaquePointer?, _ minLevel: Int32,
                                          _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        guard let level = LogLevel(rawValue: minLevel) else {
            throw AppNorthError.invalidArgument("min_level must be APPNORTH_LOG_DEBUG to APPNORTH_LOG_ERROR")
        }
        client.configuration.logger.setMinimum(level)
    }
}

/// Wraps a C log callback as a core Logger.
func hostLogger(_ fn: appnorth_log_fn?, _ minLevel: Int32,
                _ userData: UnsafeMutableRawPointer?) throws(AppNorthError) -> Logger {
    guard let fn else { return .silent }
    guard let level = LogLevel(rawValue: minLevel) else {
        throw AppNorthError.invalidArgument("min_level must be APPNORTH_LOG_DEBUG to APPNORTH_LOG_ERROR")
    }
    let context = HostPointer(raw: userData)
    return Logger(minimum: level) { level, message in
        ThreadCalls.callback { message.withCString { fn(level.rawValue, $0, context.raw) } }
    }
}

@c @implementation
public func appnorth_client_new(_ options: OpaquePointer?, _ outClient: UnsafeMutablePointer<OpaquePointer?>?,
                                _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outClient?.pointee = nil
    return guarded(err) {
        let out = try required(outClient, "out_client")
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        guard let apiURL = opts.apiURL else { throw AppNorthError.invalidArgument("options have no API URL") }
        guard let appID = opts.appID else { throw AppNorthError.invalidArgument("options have no App ID") }
        var configuration = try AppNorthClientConfiguration(apiURL: apiURL, appID: appID, credential: opts.credential,
                                                            timeouts: opts.timeouts, logger: opts.logger,
                                                            trust: opts.trust, allowCleartextHosts: opts.cleartextHosts)
        configuration.compressUploads = opts.compressUploads
        let dispatcher = opts.dispatchMode ? try CallbackDispatcher() : nil
        let client = AppNorthClient(configuration: configuration, dispatcher: dispatcher)
        out.pointee = Handle.make(client)
        // appnorth_shutdown(): its transfers are cancelled (completions are
        // not called once the gate is closed) and its dispatcher closes.
        ThreadOwners.register(client) { [weak client] in
            guard let client else { return }
            OperationTable.shared.cancelAll(of: client)
            client.dispatcher?.close()
        }
    }
}

@c @implementation
public func appnorth_client_free(_ client: OpaquePointer?) {
    // Its non-blocking operations end first (cancelled; in dispatch mode
    // their completions queued), then dispatch mode closes: the queued
    // completions run here, log lines and listener calls are dropped, and a
    // dispatch in progress runs nothing more (it is then waited for).
    Handle.release(client, as: AppNorthClient.self) {
        ThreadOwners.unregister($0)
        cancelOperations(of: $0)
        $0.dispatcher?.close()
    }
}

@c @implementation
public func appnorth_client_cancel(_ client: OpaquePointer?, _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        try Handle.get(client, as: AppNorthClient.self, "client").cancelInFlight()
    }
}

@c @implementation
public func appnorth_client_scope(_ client: OpaquePointer?, _ outScope: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                  _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outScope?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        try returnString(outScope, "out_scope") { client.scope }
    }
}

@c @implementation
public func appnorth_client_list_boards(_ client: OpaquePointer?, _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                        _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        try returnString(outJSON, "out_json") { try client.listBoards() }
    }
}

@c @implementation
public func appnorth_client_list_ideas(_ client: OpaquePointer?, _ queryJSON: UnsafePointer<CChar>?,
                                       _ outJSON: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                       _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        _ = try required(outJSON, "out_json")
        let query = try IdeaQuery(json: optionalString(queryJSON, "query_json"))
        try returnString(outJSON, "out_json") { try client.listIdeas(query) }
    }
}
