import AppNorthCore
import CAppNorthAPI

// appnorth_queue_*.

@c @implementation
public func appnorth_queue_new(_ storage: OpaquePointer?, _ maxEntries: Int32,
                               _ outQueue: UnsafeMutablePointer<OpaquePointer?>?, _ err: ErrorOut?) -> Int32 {
    outQueue?.pointee = nil
    return guarded(err) {
        let out = try required(outQueue, "out_queue")
        let box = try Handle.get(storage, as: StorageBox.self, "storage")
        guard maxEntries >= 0 else {
            throw AppNorthError.invalidArgument("max_entries must be 0 (default) to \(Limits.queueEntries.upperBound)")
        }
        let limit = maxEntries == 0 ? AppNorthOfflineQueue.defaultLimit : Int(maxEntries)
        out.pointee = Handle.make(try AppNorthOfflineQueue(storage: box.storage, limit: limit, logger: box.logger.withLock { $0 }))
    }
}

@c @implementation
public func appnorth_queue_free(_ queue: OpaquePointer?) {
    // Its non-blocking submits and flushes end first (cancelled, completions run).
    Handle.release(queue, as: AppNorthOfflineQueue.self) { cancelOperations(of: $0) }
}

/// Shared shape of the submit calls.
private func queueSubmit(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ key: UnsafePointer<CChar>?,
                         _ outSubmitted: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?,
                         _ write: () throws -> CommunityWrite) -> Int32 {
    guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        let submitted = try queue.submit(try write(), using: client, idempotencyKey: optionalString(key, "idempotency_key"))
        setOut(outSubmitted, submitted ? 1 : 0)
    }
}

@c @implementation
public func appnorth_queue_submit_idea(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ boardID: UnsafePointer<CChar>?,
                                       _ title: UnsafePointer<CChar>?, _ body: UnsafePointer<CChar>?,
                                       _ key: UnsafePointer<CChar>?, _ outSubmitted: UnsafeMutablePointer<Int32>?,
                                       _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, outSubmitted, err) { try ideaWrite(boardID, title, body) }
}

@c @implementation
public func appnorth_queue_submit_comment(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ ideaID: UnsafePointer<CChar>?,
                                          _ body: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?,
                                          _ outSubmitted: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, outSubmitted, err) { try commentWrite(ideaID, body) }
}

@c @implementation
public func appnorth_queue_submit_feedback(_ queue: OpaquePointer?, _ client: OpaquePointer?, _ feedback: OpaquePointer?,
                                           _ key: UnsafePointer<CChar>?, _ outSubmitted: UnsafeMutablePointer<Int32>?,
                                           _ err: ErrorOut?) -> Int32 {
    queueSubmit(queue, client, key, outSubmitted, err) { try feedbackWrite(feedback) }
}

@c @implementation
public func appnorth_queue_flush(_ queue: OpaquePointer?, _ client: OpaquePointer?,
                                 _ outSent: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    appnorth_queue_flush_v2(queue, client, outSent, nil, err)
}

@c @implementation
public func appnorth_queue_flush_v2(_ queue: OpaquePointer?, _ client: OpaquePointer?,
                                    _ outSent: UnsafeMutablePointer<Int32>?, _ outFailedEntryID: OutString?,
                                    _ err: ErrorOut?) -> Int32 {
    setOut(outSent, 0)
    outFailedEntryID?.pointee = nil
    return guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        var sent = 0
        var failedEntryID: String?
        defer {
            setOut(outSent, sent)
            try? returnOptionalString(outFailedEntryID, failedEntryID)
        }
        try queue.flush(using: client, sentCount: &sent, failedEntryID: &failedEntryID)
    }
}

@c @implementation
public func appnorth_queue_pending_count(_ queue: OpaquePointer?, _ outCount: UnsafeMutablePointer<Int32>?,
                                         _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        let out = try required(outCount, "out_count")
        out.pointee = Int32(clamping: try queue.pendingCount())
    }
}

@c @implementation
public func appnorth_queue_entries(_ queue: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        try returnString(outJSON, "out_json") {
            let list = JSON.array()
            for entry in try queue.pendingEntries() {
                let item = JSON.object()
                item.set("id", .string(entry.id))
                item.set("scope", .string(entry.scope))
                item.set("kind", .string(entry.kind))
                item.set("idempotency_key", .string(entry.idempotencyKey))
                item.set("created_ms", .int(entry.createdMs))
                item.set("attempts", .int(Int64(entry.attempts)))
                item.set("last_error", entry.lastError.map { .string($0) } ?? .null())
                list.append(item)
            }
            return list.serialized()
        }
    }
}

@c @implementation
public func appnorth_queue_discard(_ queue: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                   _ outDiscarded: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    setOut(outDiscarded, 0)
    return guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        setOut(outDiscarded, try queue.discard(scope: optionalString(scope, "scope")))
    }
}

@c @implementation
public func appnorth_queue_discard_entry(_ queue: OpaquePointer?, _ entryID: UnsafePointer<CChar>?,
                                         _ outDiscarded: UnsafeMutablePointer<Int32>?, _ err: ErrorOut?) -> Int32 {
    setOut(outDiscarded, 0)
    return guarded(err) {
        let queue = try Handle.get(queue, as: AppNorthOfflineQueue.self, "queue")
        let id = try requiredString(entryID, "entry_id")
        setOut(outDiscarded, try queue.discard(entryID: id) ? 1 : 0)
    }
}
