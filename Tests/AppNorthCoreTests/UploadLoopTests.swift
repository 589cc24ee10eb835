import XCTest
@testable import AppNorthCore

/// The upload loop (`UploadLoop`) through a world of the test's own: an
/// in-memory queue whose server answers `status(rows)`, every call noted
/// in order; no store, thread, clock or server. What the loop owns is
/// checked: the order of its steps, retries, status codes, splits and
/// bisects, the counters, the breaker, consent and stopping.
final class UploadLoopTests: XCTestCase {
    struct World: UploadWorld {
        var queued: [StoredEvent]
        var status: ([StoredEvent]) -> Int
        var retryAfter: String? = nil
        var generation: UInt64 = 7
        var allowed = true
        var readError: AppNorthError? = nil
        /// The send (1-based) during which consent is revoked / the thread asked to stop.
        var revokeAtSend = Int.max
        var stopAtSend = Int.max
        /// A sleep that a revocation cuts short.
        var revokeInSleep = false
        var sends = 0
        var calls: [String] = []
        var sleeps: [Int] = []
        var sentSizes: [Int] = []

        struct Sending { let rows: [StoredEvent]; let gzipped: Bool }

        var isStopping: Bool { sends >= stopAtSend }
        var moreToImport: Bool { false }

        mutating func consentGeneration() -> UInt64? { allowed ? generation : nil }

        mutating func readBatch(_ size: Int, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch {
            calls.append("read")
            if let readError { throw readError }
            return PreparedBatch(events: Array(queued.prefix(size)), body: BatchBody([], UploadCompression(enabled: false)),
                                 generation: generation, removals: 0)
        }

        mutating func lease(_ rows: [StoredEvent]) throws(AppNorthError) -> [StoredEvent] {
            calls.append("lease")
            return rows.filter { row in queued.contains { $0.seq == row.seq } }
        }

        mutating func send(_ rows: [StoredEvent], body: BatchBody?, compressed: Bool, _ generation: UInt64) -> Sending? {
            guard generation == self.generation else { return nil }
            sends += 1
            if sends == revokeAtSend { self.generation += 1 }
            calls.append("send \(rows.count)")
            sentSizes.append(rows.count)
            return Sending(rows: rows, gzipped: compressed)
        }

        mutating func prefetch(after seq: Int64?, _ size: Int, _ generation: UInt64) { calls.append("prefetch") }

        mutating func receive(_ sending: Sending) -> UploadAnswer? {
            calls.append("receive")
            if generation != 7 || isStopping { return nil }
            let code = status(sending.rows)
            let headers = retryAfter.map { [("Retry-After", $0)] } ?? []
            return UploadAnswer(status: code, response: HTTPResponse(status: code, headers: headers, body: []),
                                error: (200...299).contains(code) ? nil : .http("HTTP \(code)", httpStatus: code),
                                gzipped: sending.gzipped)
        }

        mutating func settle(_ settlement: Settlement) -> Int {
            switch settlement {
            case .delivered(let rows, let deferrable):
                calls.append(deferrable ? "delivered \(rows.count) later" : "delivered \(rows.count)")
                return remove(rows)
            case .refused(let rows, _):
                calls.append("refused \(rows.count)")
                return remove(rows)
            case .cycleEnded:
                calls.append("end")
                return 0
            }
        }

        mutating func sleep(milliseconds: Int, _ generation: UInt64) -> Bool {
            sleeps.append(milliseconds)
            if revokeInSleep { self.generation += 1 }
            return generation == self.generation
        }

        private mutating func remove(_ rows: [StoredEvent]) -> Int {
            let before = queued.count
            queued.removeAll { row in rows.contains { $0.seq == row.seq } }
            return before - queued.count
        }
    }

    let counters = EventCounters()
    let clock = ManualClock()

    func events(_ count: Int) -> [StoredEvent] {
        (0..<count).map { StoredEvent(seq: Int64($0), id: "id\($0)", payload: []) }
    }

    func loop(_ world: World, breaker: Int = 5) -> UploadLoop<World> {
        UploadLoop(world: world, state: UploaderState(networkType: .cellular, breakerThreshold: breaker), counters: counters,
                   logger: .silent, clock: clock, schedule: Backoff(retries: 3, baseMilliseconds: 1000, spread: 0.2),
                   retryAfterCapMilliseconds: 60_000, jitter: { 0.5 })
    }

    /// The steps of a cycle, in order: the next batch is read while the
    /// request of the one before is in flight, and a delivered batch is
    /// deleted later (the world's deferral).
    func testEachBatchIsSentThenPrefetchedThenAwaited() {
        var loop = loop(World(queued: events(120), status: { _ in 200 }))
        XCTAssertEqual(loop.cycle(), .succeeded)
        let batch = ["read", "lease", "send 50", "prefetch", "receive", "delivered 50 later"]
        let last = ["read", "lease", "send 20", "prefetch", "receive", "delivered 20 later"]
        XCTAssertEqual(loop.world.calls, batch + batch + last + ["read", "end"])
        XCTAssertEqual(counters.delivered, 120)
        XCTAssertTrue(loop.world.queued.isEmpty)
    }

    /// 5xx and no answer: retried after 1 s, 2 s and 4 s (the seeds; jitter
    /// 0.5 is the nominal delay), prefetched once, then kept: one failed flush.
    func testRetriesFollowTheSeedScheduleThenTheBatchIsKept() {
        var loop = loop(World(queued: events(10), status: { _ in 503 }))
        XCTAssertEqual(loop.cycle(), .kept)
        XCTAssertEqual(loop.world.sleeps, [1000, 2000, 4000])
        XCTAssertEqual(loop.world.sends, 4)
        XCTAssertEqual(loop.world.calls.filter { $0 == "prefetch" }.count, 1)
        XCTAssertEqual(loop.world.queued.count, 10, "kept for the next cycle")
        XCTAssertEqual(loop.state.withLock { $0.breaker.consecutiveFailures }, 1)
        XCTAssertEqual(loop.state.withLock { $0.lastError }, .http("HTTP 503", httpStatus: 503))
    }

    /// A server's Retry-After is waited out before the next attempt.
    func testARetryAfterIsWaitedOutBeforeTheNextAttempt() {
        var answers = [429, 200]
        var world = World(queued: events(3), status: { _ in answers.removeFirst() })
        world.retryAfter = "3"
        var loop = loop(world)
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(loop.world.sleeps, [1000, 3000], "the retry delay, then the rest of the Retry-After")
        XCTAssertEqual(counters.delivered, 3)
    }

    /// A 4xx discards the batch: counted as client errors, one failed
    /// flush, and the cycle ends (`discarded`).
    func testA4xxDiscardsTheBatch() {
        var loop = loop(World(queued: events(1), status: { _ in 403 }))
        XCTAssertEqual(loop.cycle(), .discarded)
        XCTAssertEqual(counters.snapshot().dropped(.clientError), 1)
        XCTAssertTrue(loop.world.sleeps.isEmpty, "no retry")
        XCTAssertEqual(loop.state.withLock { $0.breaker.consecutiveFailures }, 1)
    }

    /// A 413 splits into halves; an event too large alone is dropped as
    /// payload_too_large, the rest delivered.
    func testA413SplitsAndDropsOnlyTheEventTooLarge() {
        var loop = loop(World(queued: events(4), status: { rows in rows.count > 2 || rows.contains { $0.seq == 3 } ? 413 : 200 }))
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(loop.world.sentSizes, [4, 2, 2, 1, 1])
        XCTAssertEqual(counters.snapshot().dropped(.payloadTooLarge), 1)
        XCTAssertEqual(counters.delivered, 3)
        XCTAssertTrue(loop.world.queued.isEmpty)
    }

    /// A 400 naming no event is bisected: the one poisoned event is
    /// dropped, the other 19 delivered (halves removed at once).
    func testA400IsBisectedToThePoisonedEvent() {
        var loop = loop(World(queued: events(20), status: { rows in rows.contains { $0.seq == 11 } ? 400 : 200 }))
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(counters.snapshot().dropped(.clientError), 1)
        XCTAssertEqual(counters.delivered, 19)
        XCTAssertFalse(loop.world.calls.contains { $0.hasSuffix("later") }, "only a whole batch is deleted later")
    }

    /// A server that refuses everything costs the first request and the
    /// budget (12 for 20 events), and every event is counted once.
    func testARefusingServerCostsTheBudget() {
        var loop = loop(World(queued: events(20), status: { _ in 400 }))
        XCTAssertEqual(loop.cycle(), .discarded)
        XCTAssertEqual(loop.world.sends, 13)
        XCTAssertEqual(counters.snapshot().dropped(.clientError), 20)
        XCTAssertEqual(counters.delivered, 0)
    }

    /// Consent revoked while the request is in flight: the batch is left
    /// alone (the revocation purged it), never retried, nothing counted.
    func testARevocationDuringTheRequestAbandonsTheBatch() {
        var world = World(queued: events(10), status: { _ in 503 })
        world.revokeAtSend = 1
        var loop = loop(world)
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(loop.world.sends, 1)
        XCTAssertTrue(loop.world.sleeps.isEmpty)
        XCTAssertEqual(loop.state.withLock { $0.breaker.consecutiveFailures }, 0, "not a failed flush")
        XCTAssertEqual(counters.delivered + counters.snapshot().dropped(.clientError), 0)
    }

    /// Consent revoked during a retry delay: the delay ends, no retry.
    func testARevocationDuringARetryDelayStopsTheRetries() {
        var world = World(queued: events(10), status: { _ in 503 })
        world.revokeInSleep = true
        var loop = loop(world)
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(loop.world.sends, 1)
        XCTAssertEqual(loop.world.sleeps, [1000])
    }

    /// Closing (the thread asked to stop) during a request: the cycle
    /// ends, the batch stays queued, the lease is released.
    func testAStopDuringARequestEndsTheCycle() {
        var world = World(queued: events(120), status: { _ in 200 })
        world.stopAtSend = 2
        var loop = loop(world)
        XCTAssertEqual(loop.cycle(), .succeeded)
        XCTAssertEqual(loop.world.sends, 2)
        XCTAssertEqual(counters.delivered, 50)
        XCTAssertEqual(loop.world.calls.last, "end")
    }

    func testNoConsentOrAnOpenBreakerSendsNothing() {
        var notAllowed = World(queued: events(3), status: { _ in 200 })
        notAllowed.allowed = false
        var first = loop(notAllowed)
        XCTAssertEqual(first.cycle(), .succeeded)
        var paused = loop(World(queued: events(3), status: { _ in 200 }), breaker: 1)
        paused.state.recordFailedFlush(.network("down"), .silent)
        XCTAssertEqual(paused.cycle(), .paused)
        XCTAssertEqual(first.world.sends + paused.world.sends, 0)
    }

    /// Switched off by the config key `appnorth.events`: nothing is sent,
    /// the events stay queued, the breaker is not told, and a flush learns why.
    func testSwitchedOffSendsNothingAndKeepsTheEvents() {
        var off = loop(World(queued: events(3), status: { _ in 200 }))
        off.switchedOff = { true }
        XCTAssertEqual(off.cycle(), .paused)
        XCTAssertEqual(off.world.sends, 0)
        XCTAssertEqual(off.state.withLock { $0.breaker.consecutiveFailures }, 0)
        XCTAssertEqual(off.state.withLock { $0.cycleError }, EventUploader.switchedOffError)
    }

    /// An unreadable queue keeps the batch and is not the server's fault.
    func testAnUnreadableQueueKeepsTheBatchWithoutAFailedFlush() {
        var world = World(queued: events(3), status: { _ in 200 })
        world.readError = .storage("disk")
        var loop = loop(world)
        XCTAssertEqual(loop.cycle(), .kept)
        XCTAssertEqual(loop.state.withLock { $0.breaker.consecutiveFailures }, 0)
        XCTAssertEqual(loop.state.withLock { $0.cycleError }, .storage("disk"))
    }
}
