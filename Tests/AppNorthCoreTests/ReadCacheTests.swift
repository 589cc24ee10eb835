import XCTest
@testable import AppNorthCore

final class ReadCacheTests: XCTestCase {
    let scope = "http://h|app|anonymous"

    func testDefaultTTLIs300Seconds() throws {
        XCTAssertEqual(AppNorthReadCache.defaultTTLSeconds, 300)
        XCTAssertEqual(try AppNorthReadCache(storage: MemoryStorage()).ttlSeconds, 300)
    }

    func testVerify4_ReadsBeforeAndAfterExpiry() throws {
        let clock = ManualClock()
        let cache = try AppNorthReadCache(storage: MemoryStorage(), clock: clock)
        try cache.storeBoards(#"{"boards":[{"id":"b_1"}]}"#, scope: scope)
        clock.advance(milliseconds: 299_999)
        XCTAssertEqual(cache.boards(scope: scope), #"[{"id":"b_1"}]"#)
        clock.advance(milliseconds: 1)
        XCTAssertNil(cache.boards(scope: scope), "expired entries read as absent: no stale fallback")
    }

    func testKeysIncludeScopeAndEveryFilter() throws {
        let cache = try AppNorthReadCache(storage: MemoryStorage(), clock: ManualClock())
        let dark = IdeaQuery(board: "b1", search: "dark", status: "open")
        try cache.storeIdeas(#"[{"id":"i_1"}]"#, scope: scope, query: dark)
        XCTAssertEqual(cache.ideas(scope: scope, query: dark), #"[{"id":"i_1"}]"#)
        XCTAssertNil(cache.ideas(scope: scope, query: IdeaQuery(board: "b1", search: "light", status: "open")))
        XCTAssertNil(cache.ideas(scope: scope, query: IdeaQuery(board: "b1", search: "dark")))
        XCTAssertNil(cache.ideas(scope: scope, query: IdeaQuery(board: "b2", search: "dark", status: "open")))
        XCTAssertNil(cache.ideas(scope: "http://h|app|ada@example.com", query: dark))
        XCTAssertNil(cache.ideas(scope: "http://other|app|anonymous", query: dark))
    }

    func testCursorsAreNeverCached() throws {
        let cache = try AppNorthReadCache(storage: MemoryStorage())
        XCTAssertThrowsError(try cache.storeIdeas("[]", scope: scope, query: IdeaQuery(cursor: "p2")))
        try cache.storeIdeas(#"{"ideas":[],"next_cursor":"p2"}"#, scope: scope)
        XCTAssertEqual(cache.ideas(scope: scope), "[]", "only the array is kept, not the cursor")
    }

    func testClearRemovesOnlyThatScope() throws {
        let cache = try AppNorthReadCache(storage: MemoryStorage())
        let other = "http://h|app|bob@example.com"
        try cache.storeBoards("[1]", scope: scope)
        try cache.storeIdeas("[2]", scope: scope)
        try cache.storeBoards("[3]", scope: other)
        try cache.clear(scope: scope)
        XCTAssertNil(cache.boards(scope: scope))
        XCTAssertNil(cache.ideas(scope: scope))
        XCTAssertEqual(cache.boards(scope: other), "[3]")
    }

    func testRefusesWhatIsNotAnArray() throws {
        let cache = try AppNorthReadCache(storage: MemoryStorage())
        XCTAssertThrowsError(try cache.storeBoards(#"{"ideas":[]}"#, scope: scope))
        XCTAssertThrowsError(try cache.storeBoards("{", scope: scope))
    }

    func testWallClockJumpsDoNotRefreshAnEntry() throws {
        let clock = ManualClock()
        let cache = try AppNorthReadCache(storage: MemoryStorage(), clock: clock)
        try cache.storeBoards("[1]", scope: scope)
        clock.advance(milliseconds: 301_000)
        clock.setWall(milliseconds: 0)
        XCTAssertNil(cache.boards(scope: scope))
    }

    func testEntriesSurviveAReopenAndAgeByWallTime() throws {
        let storage = MemoryStorage()
        let clock = ManualClock()
        do {
            let cache = try AppNorthReadCache(storage: storage, clock: clock)
            try cache.storeBoards("[1]", scope: scope)
        }
        clock.advance(milliseconds: 1000)
        let reopened = try AppNorthReadCache(storage: storage, clock: clock)
        XCTAssertEqual(reopened.boards(scope: scope), "[1]")
        clock.setWall(milliseconds: clock.wallMilliseconds() - 10_000)
        XCTAssertNil(reopened.boards(scope: scope), "a stored time in the future counts as expired")
    }

    /// A clock at either end of its range, and stored times at either end
    /// of theirs: reads answer (expired), nothing traps.
    func testExtremeClocksAndStoredTimesReadAsExpired() throws {
        let storage = MemoryStorage()
        let clock = ManualClock()
        do {
            let cache = try AppNorthReadCache(storage: storage, clock: clock)
            try cache.storeBoards("[1]", scope: scope)
        }
        for wall in [Int64.min, Int64.min + 1, -1, Int64.max] {
            clock.setWall(milliseconds: wall)
            let reopened = try AppNorthReadCache(storage: storage, clock: clock)
            XCTAssertNil(reopened.boards(scope: scope), "wall \(wall)")
            try reopened.storeIdeas("[2]", scope: scope)
            XCTAssertEqual(reopened.ideas(scope: scope), "[2]", "stored by this process: aged on the monotonic clock")
        }
        clock.advance(milliseconds: .max)
        XCTAssertNil(try AppNorthReadCache(storage: storage, clock: clock).boards(scope: scope))
        // Rows whose stored time is damaged are dropped at load.
        for stored in [Int64.min, -1, Int64.max] {
            let row = #"{"format":"appnorth.read-cache","version":1,"entries":[{"kind":"boards","scope":"s","query":"","#
                + #""value":"[1]","stored_ms":\#(stored)}]}"#
            try storage.save(Array(row.utf8))
            let cache = try AppNorthReadCache(storage: storage, clock: ManualClock())
            XCTAssertNil(cache.boards(scope: "s"))
        }
        // A value that is not a JSON array is dropped too.
        let now = ManualClock()
        let row = #"{"format":"appnorth.read-cache","version":1,"entries":[{"kind":"boards","scope":"s","query":"","#
            + #""value":"[1","stored_ms":\#(now.wallMilliseconds())},{"kind":"boards","scope":"t","query":"","#
            + #""value":"[2]","stored_ms":\#(now.wallMilliseconds())}]}"#
        try storage.save(Array(row.utf8))
        let cache = try AppNorthReadCache(storage: storage, clock: now)
        XCTAssertNil(cache.boards(scope: "s"))
        XCTAssertEqual(cache.boards(scope: "t"), "[2]")
    }

    func testCachedThenFreshRead() throws {
        try TestServer.reset()
        _ = try TestServer.board("swift", "Features")
        let client = try TestServer.client()
        let cache = try AppNorthReadCache(storage: MemoryStorage())
        var deliveries: [(AppNorthReadCache.Source, String)] = []
        try cache.readBoards(using: client) { deliveries.append(($0, $1)) }
        XCTAssertEqual(deliveries.map(\.0), [.network], "nothing cached yet")
        deliveries.removeAll()
        try cache.readBoards(using: client) { deliveries.append(($0, $1)) }
        XCTAssertEqual(deliveries.map(\.0), [.cache, .network])

        deliveries.removeAll()
        try TestServer.offline {
            XCTAssertThrowsError(try cache.readBoards(using: client) { deliveries.append(($0, $1)) }) {
                guard case AppNorthError.network = $0 else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(deliveries.map(\.0), [.cache], "a network failure still yields the cached data")
        XCTAssertTrue(deliveries.first?.1.contains("Features") ?? false)
    }
}
