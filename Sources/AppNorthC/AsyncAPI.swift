import AppNorthCore
import CAppNorthAPI

// The non-blocking calls' shared machinery (appnorth_*_async, appnorth_op_cancel):
// one generic start, one outcome type, one way to deliver a completion.
// The exported functions (AsyncCallsAPI.swift) only convert their arguments
// and name the work.

/// What a finished operation hands its host: the result JSON (on success;
/// the counts of a queue or events flush also on failure) and the error.
struct OperationOutcome: Sendable {
    var json: String?
    var error: (any Error)?

    init(json: String?, error: (any Error)? = nil) {
        self.json = json
        self.error = error
    }

    init(_ result: Result<String, AppNorthError>) {
        switch result {
        case .success(let json): self.init(json: json)
        case .failure(let error): self.init(json: nil, error: error)
        }
    }
}

/// The host's completion callback and its user data.
private struct HostCompletion: @unchecked Sendable {
    // @unchecked: the host promises user_data stays valid until the call.
    let fn: appnorth_completion_fn
    let userData: HostPointer

    func call(_ id: UInt64, _ outcome: OperationOutcome) {
        var err = appnorth_error()
        let (code, httpStatus, message) = outcome.error.map(statusReport) ?? (0, 0, "")
        report(&err, code: code, httpStatus: httpStatus, message: message)
        ThreadCalls.callback {
            if let json = outcome.json, !holdsNUL(json) {
                json.withCString { fn(id, code, &err, $0, userData.raw) }
            } else {
                fn(id, code, &err, nil, userData.raw)
            }
        }
    }
}

/// Where a completion runs: the seam between the operations and the host's
/// threads. Default mode: at once, on the library thread that finished the
/// operation (the transfer thread or a worker). Dispatch mode: queued on
/// the client's dispatcher, run by appnorth_dispatch() (or by the client's
/// free). Every operation belongs to its client too, so the client's free
/// ends it before closing the dispatcher; a post refused by a closed
/// dispatcher cannot happen then, and would run the completion here rather
/// than lose it.
enum CompletionDelivery {
    static func deliver(for client: AppNorthClient, _ run: @escaping @Sendable () -> Void) {
        if !client.deliverCallback(run) { run() }
    }
}

/// How one operation starts: the handles it belongs to (freeing one cancels
/// it and waits for its completion), its client (whose dispatch mode
/// decides where the completion runs), and what it does.
struct OperationPlan {
    let owners: [AnyObject]
    let client: AppNorthClient
    let launch: (AsyncOperation, @escaping @Sendable (OperationOutcome) -> Void) throws -> Void

    /// A client read or write: one request on the transfer thread.
    static func call(_ client: AppNorthClient, _ call: ClientCall) -> OperationPlan {
        OperationPlan(owners: [client], client: client) { operation, finish in
            try client.start(call, operation: operation.cancellation) { finish(OperationOutcome($0)) }
        }
    }

    /// A call of several steps: its blocking form on a worker, inside the
    /// operation's scope (so its cancel ends that call and no other).
    /// Until a worker takes it, a cancel, a client cancel or
    /// `timeoutMilliseconds` (the client's request timeout for it) ends it
    /// at once, on the transfer thread, without the worker.
    static func work(owners: [AnyObject], client: AppNorthClient, timeoutMilliseconds: Int,
                     _ work: @escaping @Sendable () -> OperationOutcome) -> OperationPlan {
        OperationPlan(owners: owners, client: client) { operation, finish in
            try operation.runOnWorker(for: client, timeoutMilliseconds: timeoutMilliseconds, work) { result in
                switch result {
                case .success(let outcome): finish(outcome)
                case .failure(let error): finish(OperationOutcome(json: nil, error: error))
                }
            }
        }
    }
}

/// The body of every appnorth_*_async function: checks the callback, lets
/// `plan` check the arguments and handles (any failure is returned and
/// nothing starts), registers the operation and starts it. Its completion
/// runs exactly once, possibly before this returns.
func startOperation(_ onDone: appnorth_completion_fn?, _ userData: UnsafeMutableRawPointer?,
                    _ outOp: UnsafeMutablePointer<UInt64>?, _ err: ErrorOut?,
                    _ plan: () throws -> OperationPlan) -> Int32 {
    outOp?.pointee = 0
    return guarded(err) {
        let host = HostCompletion(fn: try required(onDone, "on_done"), userData: HostPointer(raw: userData))
        let plan = try plan()
        // The client owns every operation that uses it (its free ends them).
        let owners = plan.owners.contains { $0 === plan.client } ? plan.owners : plan.owners + [plan.client]
        let operation = try OperationTable.shared.begin(owners: owners)
        // A start that entered its handle just before that handle's free
        // began, and begins only now: the free has cancelled the handle's
        // operations (or is about to: then it waits for this one), and may
        // have let go of the shared threads. Begin nothing: its work would
        // hold them again, for ever, on a freed handle.
        if owners.contains(where: { Handle.isBeingFreed($0) }) {
            OperationTable.shared.end(operation)
            throw AppNorthError.wrongState("the handle is being freed: no call may start once its _free function was called")
        }
        SharedThreads.hold(for: owners)  // until their free: the threads its work needs live
        let client = plan.client
        let finish: @Sendable (OperationOutcome) -> Void = { outcome in
            OperationTable.shared.retire(operation)
            CompletionDelivery.deliver(for: client) { host.call(operation.id, outcome) }
            OperationTable.shared.end(operation)
        }
        do {
            try plan.launch(operation, finish)
            OperationTable.shared.launched(operation)
        } catch {
            OperationTable.shared.end(operation)
            throw error
        }
        outOp?.pointee = operation.id
    }
}

/// A handle's teardown: cancels its operations in flight and waits until
/// each one's completion has run (APPNORTH_E_CANCELLED, or its real outcome
/// if it was finishing), then lets go of the shared threads (the last
/// handle's free stops and joins them, here). From inside a host callback
/// it does not wait: this thread may be the one those completions need;
/// the hold goes when the last of them ends.
func cancelOperations(of owner: AnyObject) {
    OperationTable.shared.cancelAll(of: owner)
    if ThreadCalls.inCallback {
        let kept = KeptOwner(object: owner)  // alive until then: its identity is not reused
        OperationTable.shared.whenIdle(of: owner) { SharedThreads.drop(for: kept.object) }
        return
    }
    OperationTable.shared.waitForAll(of: owner)
    SharedThreads.drop(for: owner)
}

/// A handle object kept for its identity only (never touched).
private struct KeptOwner: @unchecked Sendable {
    let object: AnyObject
}

@c @implementation
public func appnorth_op_cancel(_ op: UInt64, _ err: ErrorOut?) -> Int32 {
    if OperationTable.shared.cancel(id: op) {
        report(err, code: 0, httpStatus: 0, message: "")
        return 0
    }
    let code = Int32(APPNORTH_E_NOT_FOUND)
    report(err, code: code, httpStatus: 0, message: "no operation \(op) is in flight (finished, or never started)")
    return code
}
