// The seed page's "Queue a write" snippet (QueuedComment.swift), verbatim.
// Do not edit: it proves the seed compiles as written.
import AppNorth

func sendComment(
    queue: AppNorthOfflineQueue,
    client: AppNorthClient,
    ideaID: String,
    body: String,
    retryKey: String
) async throws -> Bool {
    try await queue.submitComment(
        using: client,
        handle: ideaID,
        body: body,
        idempotencyKey: retryKey
    )
}

func retryPending(queue: AppNorthOfflineQueue, client: AppNorthClient) async throws -> Int {
    try await queue.flush(using: client)
    return try await queue.pendingCount()
}
