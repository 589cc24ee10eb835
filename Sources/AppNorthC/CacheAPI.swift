import AppNorthCore
import CAppNorthAPI

// appnorth_cache_* and the cached-then-fresh appnorth_read_*.

@c @implementation
public func appnorth_cache_new(_ storage: OpaquePointer?, _ ttlSeconds: Int32, _ clock: OpaquePointer?,
                               _ outCache: UnsafeMutablePointer<OpaquePointer?>?, _ err: ErrorOut?) -> Int32 {
    outCache?.pointee = nil
    return guarded(err) {
        let out = try required(outCache, "out_cache")
        let box = try Handle.get(storage, as: StorageBox.self, "storage")
        guard ttlSeconds >= 0 else { throw AppNorthError.invalidArgument("ttl_seconds must be 0 (default) or more") }
        let ttl = ttlSeconds == 0 ? AppNorthReadCache.defaultTTLSeconds : Int(ttlSeconds)
        out.pointee = Handle.make(try AppNorthReadCache(storage: box.storage, ttlSeconds: ttl, clock: clockArgument(clock),
                                                          logger: box.logger.withLock { $0 }))
    }
}

@c @implementation
public func appnorth_cache_free(_ cache: OpaquePointer?) {
    Handle.release(cache, as: AppNorthReadCache.self)
}

@c @implementation
public func appnorth_cache_store_boards(_ cache: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                        _ json: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        try cache.storeBoards(try requiredString(json, "boards_json"), scope: try requiredString(scope, "scope"))
    }
}

@c @implementation
public func appnorth_cache_store_ideas(_ cache: OpaquePointer?, _ scope: UnsafePointer<CChar>?,
                                       _ queryJSON: UnsafePointer<CChar>?, _ json: UnsafePointer<CChar>?,
                                       _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        let query = try IdeaQuery(json: optionalString(queryJSON, "query_json"))
        try cache.storeIdeas(try requiredString(json, "ideas_json"), scope: try requiredString(scope, "scope"), query: query)
    }
}

@c @implementation
public func appnorth_cache_boards(_ cache: OpaquePointer?, _ scope: UnsafePointer<CChar>?, _ outJSON: OutString?,
                                  _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        let scope = try requiredString(scope, "scope")
        _ = try required(outJSON, "out_json")
        try returnOptionalString(outJSON, cache.boards(scope: scope))
    }
}

@c @implementation
public func appnorth_cache_ideas(_ cache: OpaquePointer?, _ scope: UnsafePointer<CChar>?, _ queryJSON: UnsafePointer<CChar>?,
                                 _ outJSON: OutString?, _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        let scope = try requiredString(scope, "scope")
        let query = try IdeaQuery(json: optionalString(queryJSON, "query_json"))
        _ = try required(outJSON, "out_json")
        try returnOptionalString(outJSON, cache.ideas(scope: scope, query: query))
    }
}

@c @implementation
public func appnorth_cache_clear(_ cache: OpaquePointer?, _ scope: UnsafePointer<CChar>?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        try cache.clear(scope: try requiredString(scope, "scope"))
    }
}

/// Wraps the host's read callback.
private func deliverer(_ fn: appnorth_read_fn, _ userData: UnsafeMutableRawPointer?) -> (AppNorthReadCache.Source, String) -> Void {
    { source, json in ThreadCalls.callback { json.withCString { fn(source.rawValue, $0, userData) } } }
}

@c @implementation
public func appnorth_read_boards(_ cache: OpaquePointer?, _ client: OpaquePointer?, _ fn: appnorth_read_fn?,
                                 _ userData: UnsafeMutableRawPointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        try cache.readBoards(using: client, deliver: deliverer(try required(fn, "fn"), userData))
    }
}

@c @implementation
public func appnorth_read_ideas(_ cache: OpaquePointer?, _ client: OpaquePointer?, _ queryJSON: UnsafePointer<CChar>?,
                                _ fn: appnorth_read_fn?, _ userData: UnsafeMutableRawPointer?, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let cache = try Handle.get(cache, as: AppNorthReadCache.self, "cache")
        let client = try Handle.get(client, as: AppNorthClient.self, "client")
        let query = try IdeaQuery(json: optionalString(queryJSON, "query_json"))
        try cache.readIdeas(using: client, query: query, deliver: deliverer(try required(fn, "fn"), userData))
    }
}
