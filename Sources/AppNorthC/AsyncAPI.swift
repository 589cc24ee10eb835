import AppNorthCore
import CAppNorthAPI

// The non-blocking calls' C side (appnorth_*_async, appnorth_op_cancel): the
// arguments converted, the host's completion called. An operation's life
// (start, the race with a free, cancel, delivery, end) is the core's
// (Async/OperationLife.swift). The exported functions (AsyncCallsAPI.swift)
// only convert their arguments and name the work.

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
    /// `timeoutMilliseconds` (the client's request timeout for it, counted
    /// from the start) ends it at once, on the transfer thread, without the
    /// worker; once taken, its first request ends by that same deadline.
    static func work(owners: [AnyObject], client: AppNorthClient, timeoutMilliseconds: Int,
                     _ work: @escaping @Sendable () -> OperationOutcome) -> OperationPlan {
        OperationPlan(owners: owners, client: client) { operation, finish in
            try operation.runOnWorker(share: client, transport: client.transport, timeoutMilliseconds: timeoutMilliseconds,
                                      work) { result in
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
/// nothing starts), then starts the operation (`OperationTable.start`).
/// Its completion runs exactly once, possibly before this returns.
func startOperation(_ onDone: appnorth_completion_fn?, _ userData: UnsafeMutableRawPointer?,
                    _ outOp: UnsafeMutablePointer<UInt64>?, _ err: ErrorOut?,
                    _ plan: () throws -> OperationPlan) -> Int32 {
    outOp?.pointee = 0
    return guarded(err) {
        let host = HostCompletion(fn: try required(onDone, "on_done"), userData: HostPointer(raw: userData))
        let plan = try plan()
        // The client owns every operation that uses it (its free ends them).
        let owners = plan.owners.contains { $0 === plan.client } ? plan.owners : plan.owners + [plan.client]
        let client = plan.client
        // Not `outOp?.pointee = try ...`: with no out_op that would start nothing.
        let id = try OperationTable.shared.start(
            owners: owners, beingFreed: { Handle.isBeingFreed($0) },
            deliver: { CompletionDelivery.deliver(for: client, $0) },
            complete: { id, outcome in host.call(id, outcome) }, launch: plan.launch)
        outOp?.pointee = id
    }
}

/// A handle's teardown: its operations in flight cancelled and their
/// completions waited for, unless this is a host callback's thread (which
/// those completions may need): `OperationTable.endAll`.
func cancelOperations(of owner: AnyObject) {
    OperationTable.shared.endAll(of: owner, waiting: !ThreadCalls.inCallback)
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
