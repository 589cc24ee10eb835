import AppNorthCore
import CAppNorthAPI

// appnorth_config_status and the status listeners (issue #40 item 4).

extension appnorth_data_source_status {
    /// The C struct for a status; the error's message is cut by `report`,
    /// as every appnorth_error's is.
    init(_ status: ConfigStatus) {
        self.init()
        state = status.state.rawValue
        since_ms = status.sinceWallMilliseconds
        last_error_ms = status.lastErrorWallMilliseconds
        if let error = status.lastError {
            report(&last_error, code: error.status, httpStatus: error.httpStatus, message: error.message)
        }
    }
}

@c @implementation
public func appnorth_config_status(_ config: OpaquePointer?, _ outStatus: UnsafeMutablePointer<appnorth_data_source_status>?,
                                   _ err: ErrorOut?) -> Int32 {
    outStatus?.pointee = appnorth_data_source_status()
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let out = try required(outStatus, "out_status")
        out.pointee = appnorth_data_source_status(config.status)
    }
}

@c @implementation
public func appnorth_config_add_status_listener(_ config: OpaquePointer?, _ fn: appnorth_config_status_fn?,
                                                _ userData: UnsafeMutableRawPointer?,
                                                _ outToken: UnsafeMutablePointer<Int64>?, _ err: ErrorOut?) -> Int32 {
    outToken?.pointee = 0
    return guarded(err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        let fn = try required(fn, "fn")
        let out = try required(outToken, "out_token")
        let context = HostPointer(raw: userData)
        out.pointee = try config.addStatusListener { status in
            var value = appnorth_data_source_status(status)
            ThreadCalls.callback { fn(&value, context.raw) }
        }
    }
}

@c @implementation
public func appnorth_config_remove_status_listener(_ config: OpaquePointer?, _ token: Int64, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        try Handle.get(config, as: AppNorthRemoteConfig.self, "config").removeStatusListener(token)
    }
}
