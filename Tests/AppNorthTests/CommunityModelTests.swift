import AppNorth
import Synchronization
import Foundation
import Observation
import XCTest

/// The community model that AppNorthView renders: fresh cached boards and
/// ideas at once, then the network's.
@MainActor
final class CommunityModelTests: ServerTestCase {
    func testShowsFreshCachedDataFirstThenTheNetworks() async throws {
        let client = try TestServer.client(timeoutMs: 60_000)
        let cache = AppNorthReadCache(storage: MemorySDKStorage())
        let cachedBoards = [Board(id: "b_cached", name: "Cached board")]
        let cachedIdeas = [Idea(id: "i_cached", boardID: "b_cached", title: "Cached idea")]
        try await cache.storeBoards(cachedBoards, scope: client.scope)
        try await cache.storeIdeas(cachedIdeas, scope: client.scope)

        let model = AppNorthCommunityModel(client: client, cache: cache)
        // The network's boards arrive only when the test lets them: the
        // server holds the request until the test sees the cached state.
        try TestServer.post("/admin/faults", #"{"delay_ms":3000,"count":1,"path_prefix":"/v1/apps/swiftapi/boards"}"#)
        let changed = ChangeLog()
        observe(model, into: changed)
        let load = Task { await model.load() }
        try await TestServer.waitUntilFaultsTaken()
        XCTAssertEqual(model.boards, cachedBoards, "the cached boards show while the network is held")
        XCTAssertEqual(model.ideas, cachedIdeas)
        XCTAssertEqual(model.boardsSource, .cache)
        XCTAssertTrue(model.isLoading)
        await load.value

        XCTAssertEqual(model.boards.map(\.name), ["Features"])
        XCTAssertEqual(model.ideas.map(\.title), ["Dark mode"])
        XCTAssertEqual(model.boardsSource, .network)
        XCTAssertEqual(model.ideasSource, .network)
        XCTAssertNil(model.error)
        XCTAssertFalse(model.isLoading)
        XCTAssertGreaterThan(changed.count, 0, "observers were told of the changes")
        let stored = try await cache.boards(scope: client.scope)
        XCTAssertEqual(stored?.map(\.name), ["Features"], "the network's result is cached")
    }

    func testNetworkFailureKeepsCachedDataAndSetsError() async throws {
        let client = try TestServer.client()
        let cache = AppNorthReadCache(storage: MemorySDKStorage())
        let cachedBoards = [Board(id: "b_cached", name: "Cached board")]
        try await cache.storeBoards(cachedBoards, scope: client.scope)
        let model = AppNorthCommunityModel(client: client, cache: cache)
        try TestServer.offline()
        await model.load()
        XCTAssertEqual(model.boards, cachedBoards)
        XCTAssertEqual(model.boardsSource, .cache)
        XCTAssertEqual(model.ideasSource, .none)
        guard case AppNorthError.network? = model.error as? AppNorthError else {
            return XCTFail("\(String(describing: model.error))")
        }
    }

    func testExpiredCacheShowsNothingBeforeTheNetwork() async throws {
        let client = try TestServer.client()
        let clock = ManualClock()
        let cache = AppNorthReadCache(storage: MemorySDKStorage(), clock: clock)
        try await cache.storeBoards([Board(id: "b_old", name: "Old")], scope: client.scope)
        clock.advance(milliseconds: 300_000)
        let model = AppNorthCommunityModel(client: client, cache: cache)
        try TestServer.offline()
        await model.load()
        XCTAssertEqual(model.boards, [], "no stale fallback")
        XCTAssertEqual(model.boardsSource, .none)
        XCTAssertNotNil(model.error)
    }
}

/// Registers for the next change of any shown value, again and again.
@MainActor
func observe(_ model: AppNorthCommunityModel, into log: ChangeLog) {
    withObservationTracking {
        _ = (model.boards, model.ideas, model.boardsSource, model.ideasSource, model.isLoading)
    } onChange: {
        log.record()
        Task { @MainActor in observe(model, into: log) }
    }
}

/// Counts observed changes.
final class ChangeLog: Sendable {
    private let changes = Mutex(0)
    func record() { changes.withLock { $0 += 1 } }
    var count: Int { changes.withLock { $0 } }
}
