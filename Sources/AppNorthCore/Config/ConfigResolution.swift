/// The effective config at one moment: the document of the highest tier
/// available (tiers are never merged key by key), and what is known about
/// its freshness.
package struct ResolvedConfig: Sendable {
    package let document: ConfigDocument
    package let tier: ConfigTier
    /// The server's ETag for this document (`"N"`), nil when unknown.
    package let etag: String?
    /// The server's version number, nil when unknown.
    package let version: Int64?
    /// When it was last fetched or confirmed (wall milliseconds); 0 for the
    /// bundled and default tiers.
    package let fetchedWallMilliseconds: Int64
    /// That time on the monotonic clock (nanoseconds; may be negative for a
    /// copy loaded from the cache, see `ConfigFreshness`); nil when never
    /// fetched or when its age is unknown: it then counts as expired.
    let fetchedMonotonic: Int64?

    init(document: ConfigDocument, tier: ConfigTier, etag: String? = nil, version: Int64? = nil,
         fetchedWallMilliseconds: Int64 = 0, fetchedMonotonic: Int64? = nil) {
        self.document = document
        self.tier = tier
        self.etag = etag
        self.version = version
        self.fetchedWallMilliseconds = fetchedWallMilliseconds
        self.fetchedMonotonic = fetchedMonotonic
    }

    /// The initial resolution at open: the cached copy over the bundled
    /// file over nothing.
    static func initial(cached: ConfigCache.Record?, bundled: ConfigDocument?, clock: any AppNorthClock) -> ResolvedConfig {
        if let cached {
            let mono = ConfigFreshness.monotonicFetchTime(storedWallMilliseconds: cached.fetchedWallMilliseconds,
                                                          nowWallMilliseconds: clock.wallMilliseconds(),
                                                          nowMonotonic: clock.monotonicNanoseconds())
            return ResolvedConfig(document: cached.document, tier: .cached, etag: cached.etag,
                                  version: cached.version, fetchedWallMilliseconds: cached.fetchedWallMilliseconds,
                                  fetchedMonotonic: mono)
        }
        if let bundled { return ResolvedConfig(document: bundled, tier: .bundled) }
        return ResolvedConfig(document: .empty, tier: .default)
    }

    /// The same document, confirmed by the server (a 304) just now.
    func confirmed(wallMilliseconds: Int64, monotonic: Int64, etag: String?) -> ResolvedConfig {
        ResolvedConfig(document: document, tier: .remote, etag: etag ?? self.etag, version: version,
                       fetchedWallMilliseconds: wallMilliseconds, fetchedMonotonic: monotonic)
    }
}

/// The TTL rule, as a pure policy.
///
/// Within a process, age is measured on the monotonic clock, so a wall
/// clock set back cannot make a stale config look fresh. A copy loaded from
/// the cache gets its age once, from the wall clock at load (the only clock
/// that survives a restart), and is then aged monotonically; a stored fetch
/// time in the future counts as expired.
package struct ConfigFreshness: Sendable, Equatable {
    package let ttlMilliseconds: Int64

    package init(ttlSeconds: Int) {
        ttlMilliseconds = Int64(ttlSeconds).multipliedSaturating(by: 1000)
    }

    /// The monotonic time a cached copy was fetched at, in this process's
    /// terms: now minus its wall age; nil (expired) when that age is
    /// negative.
    package static func monotonicFetchTime(storedWallMilliseconds: Int64, nowWallMilliseconds: Int64,
                                          nowMonotonic: UInt64) -> Int64? {
        // The stored time is a row on disk and the wall clock may be set
        // anywhere: an age too large to represent is simply expired.
        let (age, ageOverflow) = nowWallMilliseconds.subtractingReportingOverflow(storedWallMilliseconds)
        guard !ageOverflow, age >= 0 else { return nil }
        let (ageNanoseconds, overflow) = age.multipliedReportingOverflow(by: 1_000_000)
        if overflow { return nil }
        return Int64(clamping: nowMonotonic) - ageNanoseconds
    }

    /// True while less than the TTL has passed since `fetchedMonotonic`.
    package func isFresh(fetchedMonotonic: Int64?, nowMonotonic: UInt64) -> Bool {
        guard let fetched = fetchedMonotonic else { return false }
        let age = Int64(clamping: nowMonotonic).subtractingSaturating(fetched)
        return age >= 0 && age / 1_000_000 < ttlMilliseconds
    }
}
