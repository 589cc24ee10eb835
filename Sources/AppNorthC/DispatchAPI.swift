import AppNorthCore
import CAppNorthAPI

// appnorth_client_options_set_dispatch_mode, appnorth_dispatch and
// appnorth_dispatch_fd: the host runs its callbacks (CallbackDispatcher).

@c @implementation
public func appnorth_client_options_set_dispatch_mode(_ options: OpaquePointer?, _ enabled: Int32,
                                                      _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guarded(err) {
        let opts = try Handle.get(options, as: ClientOptions.self, "options")
        opts.dispatchMode = try flag(enabled, "enabled")
    }
}

/// The dispatcher of a dispatch-mode client.
private func dispatcher(of client: AppNorthClient) throws(AppNorthError) -> CallbackDispatcher {
    guard let dispatcher = client.dispatcher else {
        throw .wrongState("the client is not in dispatch mode (appnorth_client_options_set_dispatch_mode)")
    }
    return dispatcher
}

@c @implementation
public func appnorth_dispatch(_ client: OpaquePointer?, _ maxCallbacks: Int32, _ outRan: UnsafeMutablePointer<Int32>?,
                              _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outRan?.pointee = 0
    // Nothing pending, the frame loop's common case: the call is counted on
    // the handle and one atomic load answers; no lock, no system call.
    let idle = Handle.peek(client, as: AppNorthClient.self) { client in
        client.dispatcher.map { !$0.hasPending } ?? false
    }
    if idle == true, maxCallbacks >= 0 {
        if let err {
            err.pointee.code = 0
            err.pointee.http_status = 0
            err.pointee.message.0 = 0
        }
        return 0
    }
    return guarded(err) {
        try Handle.borrow(client, as: AppNorthClient.self, "client") { client in
            let dispatcher = try dispatcher(of: client)
            guard maxCallbacks >= 0 else {
                throw AppNorthError.invalidArgument("max_callbacks must be 0 (all queued) or positive, not \(maxCallbacks)")
            }
            // Nothing pending: one atomic load, the frame loop's common case.
            guard dispatcher.hasPending else { return }
            let ran = ThreadCalls.callback(refused: 0) { dispatcher.dispatch(max: Int(maxCallbacks)) }
            setOut(outRan, ran)
        }
    }
}

@c @implementation
public func appnorth_dispatch_fd(_ client: OpaquePointer?, _ outFd: UnsafeMutablePointer<Int32>?,
                                 _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    outFd?.pointee = -1
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        let out = try required(outFd, "out_fd")
        let dispatcher = try dispatcher(of: client)
        guard !dispatcher.isClosed else { throw AppNorthError.wrongState("the client is being freed") }
        out.pointee = dispatcher.descriptor
    }
}
