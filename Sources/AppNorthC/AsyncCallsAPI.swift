import AppNorthCore
import CAppNorthAPI

// appnorth_*_async: the non-blocking form of every network call. Each one
// converts its arguments as its blocking form does and names its work;
// startOperation (AsyncAPI.swift) does the rest.

public typealias Completion = appnorth_completion_fn
public typealias OpOut = UnsafeMutablePointer<UInt64>
public typealias CString = UnsafePointer<CChar>

private func clientCall(_ client: OpaquePointer?, _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                        _ outOp: OpOut?, _ err: ErrorOut?, _ call: () throws -> ClientCall) -> Int32 {
    startOperation(onDone, userData, outOp, err) {
        .call(try Handle.get(client, as: AppNorthClient.self, "client"), try call())
    }
}

// MARK: Client reads

@c @implementation
public func appnorth_client_list_boards_async(_ client: OpaquePointer?, _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                                              _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) { .listBoards }
}

@c @implementation
public func appnorth_client_list_ideas_async(_ client: OpaquePointer?, _ queryJSON: CString?, _ onDone: Completion?,
                                             _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .listIdeas(try IdeaQuery(json: optionalString(queryJSON, "query_json")))
    }
}

@c @implementation
public func appnorth_client_list_comments_async(_ client: OpaquePointer?, _ ideaID: CString?, _ onDone: Completion?,
                                                _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) { .listComments(ideaID: try requiredString(ideaID, "idea_id")) }
}

@c @implementation
public func appnorth_client_list_chat_messages_async(_ client: OpaquePointer?, _ onDone: Completion?,
                                                     _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?,
                                                     _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) { .listChatMessages }
}

// MARK: Client writes

@c @implementation
public func appnorth_client_submit_idea_async(_ client: OpaquePointer?, _ boardID: CString?, _ title: CString?,
                                              _ body: CString?, _ key: CString?, _ onDone: Completion?,
                                              _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .submit(try ideaWrite(boardID, title, body), idempotencyKey: try optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_submit_comment_async(_ client: OpaquePointer?, _ ideaID: CString?, _ body: CString?,
                                                 _ key: CString?, _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                                                 _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .submit(try commentWrite(ideaID, body), idempotencyKey: try optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_submit_feedback_async(_ client: OpaquePointer?, _ feedback: OpaquePointer?, _ key: CString?,
                                                  _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                                                  _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .submit(try feedbackWrite(feedback), idempotencyKey: try optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_vote_async(_ client: OpaquePointer?, _ ideaID: CString?, _ key: CString?,
                                       _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                                       _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .vote(ideaID: try requiredString(ideaID, "idea_id"), idempotencyKey: try optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_send_chat_message_async(_ client: OpaquePointer?, _ body: CString?, _ key: CString?,
                                                    _ onDone: Completion?, _ userData: UnsafeMutableRawPointer?,
                                                    _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, onDone, userData, outOp, err) {
        .sendChatMessage(try requiredString(body, "body"), idempotencyKey: try optionalString(key, "idempotency_key"))
    }
}

// MARK: Offline queue

/// A queue submit: checked now, then tried (and queued on a network
/// failure or a cancel) on a worker. Result: {"submitted":true|false}.
/// A queue on host callback storage has no non-blocking calls: its load and
/// save callbacks run only on threads that call into the library (docs/threading.md).
private func asyncQueue(_ queue: OpaquePointer?) throws -> AppNorthOfflineQueue {
    let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
    if queue.storage is HostCallbackStorage {
        throw AppNorthError.wrongState("a queue on callback storage (appnorth_storage_new_callbacks) has no "
                                       + "non-blocking calls: its callbacks run only on the host's threads")
    }
    return queue
}

private func queueSubmit(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ key: CString?, _ onDone: Completion?,
                         _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?,
                         _ write: () throws -> CommunityWrite) -> Int32 {
    startOperation(onDone, userData, outOp, err) {
        let queue = try asyncQueue(queue)
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        let write = try write()
        let key = try write.checkedForSubmit(idempotencyKey: optionalString(key, "idempotency_key"))
        return .work(owners: [queue, client], client: client,
                     timeoutMilliseconds: client.configuration.timeouts.apiRequestMilliseconds) {
            do {
                let submitted = try queue.submit(write, using: client, idempotencyKey: key)
                return OperationOutcome(json: submitted ? #"{"submitted":true}"# : #"{"submitted":false}"#)
            } catch {
                return OperationOutcome(json: nil, error: error)
            }
        }
    }
}

@c @implementation
public func appnorth_queue_submit_idea_async(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ boardID: CString?,
                                             _ title: CString?, _ body: CString?, _ key: CString?, _ onDone: Completion?,
                                             _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, onDone, userData, outOp, err) { try ideaWrite(boardID, title, body) }
}

@c @implementation
public func appnorth_queue_submit_comment_async(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ ideaID: CString?,
                                                _ body: CString?, _ key: CString?, _ onDone: Completion?,
                                                _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, onDone, userData, outOp, err) { try commentWrite(ideaID, body) }
}

@c @implementation
public func appnorth_queue_submit_feedback_async(_ queue: OpaquePointer?, _ client: OpaquePointer?,
                                                 _ feedback: OpaquePointer?, _ key: CString?, _ onDone: Completion?,
                                                 _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, onDone, userData, outOp, err) { try feedbackWrite(feedback) }
}

/// Result: {"sent":N,"failed_entry_id":"..."|null}, on failure too.
@c @implementation
public func appnorth_queue_flush_async(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ onDone: Completion?,
                                       _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    startOperation(onDone, userData, outOp, err) {
        let queue = try asyncQueue(queue)
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        return .work(owners: [queue, client], client: client,
                     timeoutMilliseconds: client.configuration.timeouts.apiRequestMilliseconds) {
            var sent = 0
            var failedEntryID: String?
            var failure: (any Error)?
            do {
                try queue.flush(using: client, sentCount: &sent, failedEntryID: &failedEntryID)
            } catch {
                failure = error
            }
            let result = JSON.object()
            result.set("sent", .int(Int64(sent)))
            result.set("failed_entry_id", failedEntryID.map { .string($0) } ?? .null())
            return OperationOutcome(json: result.serialized(), error: failure)
        }
    }
}

// MARK: Config and events

/// Result: {} (read the config with the getters; listeners fire as for
/// appnorth_config_refresh, on the thread that applies the change).
@c @implementation
public func appnorth_config_refresh_async(_ config: OpaquePointer?, _ onDone: Completion?,
                                          _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    startOperation(onDone, userData, outOp, err) {
        let config = try Handle.get(config, as: AppNorthRemoteConfig.self, "config")
        return .work(owners: [config], client: config.client,
                     timeoutMilliseconds: config.client.configuration.timeouts.resourceDownloadMilliseconds) {
            do {
                try config.refresh()
                return OperationOutcome(json: "{}")
            } catch {
                return OperationOutcome(json: nil, error: error)
            }
        }
    }
}

/// Result: {"sent":N} (events the server accepted meanwhile), on failure too.
@c @implementation
public func appnorth_events_flush_async(_ events: OpaquePointer?, _ timeoutMs: Int32, _ onDone: Completion?,
                                        _ userData: UnsafeMutableRawPointer?, _ outOp: OpOut?, _ err: ErrorOut?) -> Int32 {
    startOperation(onDone, userData, outOp, err) {
        let events = try Handle.get(events, as: AppNorthEvents.self, "events")
        guard timeoutMs >= 0 else { throw AppNorthError.invalidArgument("timeout_ms must be 0 or more") }
        // No worker waits: the transfer engine's thread watches the deadline
        // and the cancel, and the upload thread's cycle end completes it.
        return OperationPlan(owners: [events], client: events.client) { operation, finish in
            let before = events.deliveredCount
            try events.startFlush(timeoutMilliseconds: Int(timeoutMs), operation: operation.cancellation) { failure in
                finish(OperationOutcome(json: #"{"sent":\#(max(0, events.deliveredCount &- before))}"#, error: failure))
            }
        }
    }
}
