import Foundation

/// Where an `AppNorthOfflineQueue` keeps its entries: one blob, loaded on
/// the queue's first use and replaced on every change; `save(nil)` erases
/// it. Implement it with your app's protected storage (an actor is the
/// usual shape), or use `AppNorthMemoryStorage` or `AppNorthSQLiteStorage`.
/// Queue contents can include report text, diagnostics, screenshots and an
/// identity scope; do not store credentials alongside them.
///
/// Give the queue and the cache separate instances: their formats differ,
/// and one instance given to both is refused with
/// `AppNorthError.wrongState` on first use. A storage must not call back
/// into the queue or cache that uses it.
public protocol AppNorthOfflineQueueStorage: Sendable {
    func load() async throws -> Data?
    func save(_ data: Data?) async throws
}

/// Where an `AppNorthReadCache` keeps its entries. Same shape as the
/// queue's storage; use a separate instance.
public protocol AppNorthReadCacheStorage: Sendable {
    func load() async throws -> Data?
    func save(_ data: Data?) async throws
}
