import AppNorthCore
import CAppNorthAPI

// appnorth_client_submit_*, vote, chat and comments.

public typealias OutString = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
public typealias ErrorOut = UnsafeMutablePointer<appnorth_error>

/// Shared shape of the client write calls: resolve the client, run the
/// write, hand the answer back if the caller wants it.
private func clientCall(_ client: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?,
                        _ body: (AppNorthClient) throws -> String) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        try returnOptionalString(outJSON, try body(client))
    }
}

@c @implementation
public func appnorth_client_submit_idea(_ client: OpaquePointer?, _ boardID: UnsafePointer<CChar>?,
                                        _ title: UnsafePointer<CChar>?, _ body: UnsafePointer<CChar>?,
                                        _ key: UnsafePointer<CChar>?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, outJSON, err) { client in
        try client.submit(try ideaWrite(boardID, title, body), idempotencyKey: optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_submit_comment(_ client: OpaquePointer?, _ ideaID: UnsafePointer<CChar>?,
                                           _ body: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?,
                                           _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, outJSON, err) { client in
        try client.submit(try commentWrite(ideaID, body), idempotencyKey: optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_submit_feedback(_ client: OpaquePointer?, _ feedback: OpaquePointer?,
                                            _ key: UnsafePointer<CChar>?, _ outJSON: OutString?,
                                            _ err: ErrorOut?) -> Int32 {
    clientCall(client, outJSON, err) { client in
        try client.submit(try feedbackWrite(feedback), idempotencyKey: optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_vote(_ client: OpaquePointer?, _ ideaID: UnsafePointer<CChar>?,
                                 _ key: UnsafePointer<CChar>?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    clientCall(client, outJSON, err) { client in
        try client.vote(ideaID: requiredString(ideaID, "idea_id"), idempotencyKey: optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_send_chat_message(_ client: OpaquePointer?, _ body: UnsafePointer<CChar>?,
                                              _ key: UnsafePointer<CChar>?, _ outJSON: OutString?,
                                              _ err: ErrorOut?) -> Int32 {
    clientCall(client, outJSON, err) { client in
        try client.sendChatMessage(requiredString(body, "body"), idempotencyKey: optionalString(key, "idempotency_key"))
    }
}

@c @implementation
public func appnorth_client_list_chat_messages(_ client: OpaquePointer?, _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        try returnString(outJSON, "out_json") { try client.listChatMessages() }
    }
}

@c @implementation
public func appnorth_client_list_comments(_ client: OpaquePointer?, _ ideaID: UnsafePointer<CChar>?,
                                          _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        let id = try requiredString(ideaID, "idea_id")
        _ = try required(outJSON, "out_json")
        try returnString(outJSON, "out_json") { try client.listComments(ideaID: id) }
    }
}

// MARK: Argument conversion shared with the queue calls

func ideaWrite(_ boardID: UnsafePointer<CChar>?, _ title: UnsafePointer<CChar>?,
               _ body: UnsafePointer<CChar>?) throws -> CommunityWrite {
    .idea(boardID: try requiredString(boardID, "board_id"), title: try requiredString(title, "title"),
          body: try optionalString(body, "body") ?? "")
}

func commentWrite(_ ideaID: UnsafePointer<CChar>?, _ body: UnsafePointer<CChar>?) throws -> CommunityWrite {
    .comment(ideaID: try requiredString(ideaID, "idea_id"), body: try requiredString(body, "body"))
}

func feedbackWrite(_ feedback: OpaquePointer?) throws -> CommunityWrite {
    .feedback(try Handle.get(feedback, as: FeedbackBuilder.self, "feedback").feedback)
}
