// The seed page's "Provide storage" snippet (seeds/appnorth-offline-writes-
// and-cache.md, MemorySDKStorage.swift), verbatim. Do not edit: it proves
// the seed compiles as written.
import Foundation
import AppNorth

actor MemorySDKStorage: AppNorthOfflineQueueStorage, AppNorthReadCacheStorage {
    private var data: Data?

    func load() async throws -> Data? { data }
    func save(_ data: Data?) async throws { self.data = data }
}
