import XCTest
@testable import AppNorthCore

/// Automatic sessions (`SessionPolicy`, `EventSender.rotateIfDue`): a new
/// session when an event is made after the idle gap or past the maximum
/// length, on a manual clock; then the same through a queue, at the server.
final class SessionRotationTests: EventsTestCase {
    func sender(_ policy: SessionPolicy, nowMs: Int64 = 1_000) throws -> EventSender {
        EventSender(identity: try Identity(store: MemorySecureStore(), clock: ManualClock()), sessionID: "s1",
                    policy: policy, nowMs: nowMs)
    }

    func testThePolicyEndsASessionAfterTheIdleGapOrAtTheMaximumLength() {
        let policy = SessionPolicy(idleMilliseconds: 100, maxMilliseconds: 1_000)
        XCTAssertFalse(policy.isDue(now: 1_099, start: 1_000, last: 1_000))
        XCTAssertTrue(policy.isDue(now: 1_100, start: 1_000, last: 1_000), "idle for exactly the timeout")
        XCTAssertFalse(policy.isDue(now: 1_999, start: 1_000, last: 1_950))
        XCTAssertTrue(policy.isDue(now: 2_000, start: 1_000, last: 1_950), "the maximum length, never idle")
        XCTAssertFalse(policy.isDue(now: 500, start: 1_000, last: 1_000), "a clock set back is no gap")
        let off = SessionPolicy(idleMilliseconds: 0, maxMilliseconds: 0)
        XCTAssertTrue(off.isOff)
        XCTAssertFalse(off.isDue(now: .max, start: 0, last: 0))
        XCTAssertFalse(SessionPolicy(idleMilliseconds: 0, maxMilliseconds: 10).isDue(now: 1_009, start: 1_000, last: 0))
        XCTAssertThrowsError(try SessionPolicy(idleMilliseconds: -1).validate())
        XCTAssertThrowsError(try SessionPolicy(maxMilliseconds: Int(Int32.max) + 1).validate())
        XCTAssertEqual(AppNorthEventsOptions().session, SessionPolicy(idleMilliseconds: 1_800_000, maxMilliseconds: 86_400_000))
    }

    func testEventsKeepTheSessionWhileTheyComeWithinTheIdleGap() throws {
        let sender = try sender(SessionPolicy(idleMilliseconds: 100, maxMilliseconds: 0))
        let generation = sender.tail.generation
        for now in stride(from: Int64(1_050), through: 5_000, by: 99) { sender.rotateIfDue(nowMs: now) }
        XCTAssertEqual(sender.sessionID, "s1", "every event within 99 ms of the last: one session of 4 s")
        XCTAssertEqual(sender.tail.generation, generation, "the tail was not rebuilt")
        sender.rotateIfDue(nowMs: 4_960 + 100)
        XCTAssertNotEqual(sender.sessionID, "s1", "100 ms without an event")
        XCTAssertGreaterThan(sender.tail.generation, generation)
    }

    func testTheMaximumLengthEndsABusySessionAndStartSessionRestartsBothCounts() throws {
        let sender = try sender(SessionPolicy(idleMilliseconds: 100, maxMilliseconds: 1_000))
        for now in stride(from: Int64(1_000), to: 2_000, by: 50) { sender.rotateIfDue(nowMs: now) }
        XCTAssertEqual(sender.sessionID, "s1")
        sender.rotateIfDue(nowMs: 2_000)
        let second = sender.sessionID
        XCTAssertNotEqual(second, "s1", "1,000 ms since it started, busy or not")
        sender.rotateIfDue(nowMs: 2_050)
        XCTAssertEqual(sender.sessionID, second, "the new session counts from its first event")
        sender.newSession("host", nowMs: 2_090)
        sender.rotateIfDue(nowMs: 2_180)
        XCTAssertEqual(sender.sessionID, "host", "start_session restarts the idle count")
        sender.rotateIfDue(nowMs: 2_280)
        XCTAssertNotEqual(sender.sessionID, "host")
    }

    func testOffKeepsOneSessionUntilStartSession() throws {
        let sender = try sender(SessionPolicy(idleMilliseconds: 0, maxMilliseconds: 0))
        sender.rotateIfDue(nowMs: .max)
        XCTAssertEqual(sender.sessionID, "s1")
    }

    /// Through a queue on a manual clock: the session id in each event the
    /// server stored, and `sessionID` the next event's.
    func testEventsAtTheServerCarryTheRotatedSessions() throws {
        let clock = ManualClock()
        let events = try AppNorthEvents(client: TestServer.client(app: app), directory: DataDirectory(path: folder),
                                        options: quiet { $0.session = SessionPolicy(idleMilliseconds: 60_000, maxMilliseconds: 600_000) },
                                        clock: clock)
        defer { events.close(timeoutMilliseconds: 0) }
        let first = try events.sessionID
        try events.track("a")
        clock.advance(milliseconds: 59_999)
        try events.track("b")
        clock.advance(milliseconds: 60_000)
        try events.track("c")
        let afterIdle = try events.sessionID
        for _ in 0..<10 {
            clock.advance(milliseconds: 59_000)
            try events.track("busy")
        }
        clock.advance(milliseconds: 59_000)
        try events.track("d")
        let afterMax = try events.sessionID
        try events.flush(timeoutMilliseconds: 30_000)
        let stored = try serverEvents()
        func session(_ name: String) -> String? {
            stored.first { $0["name"]?.stringValue == name }?["session_id"]?.stringValue
        }
        XCTAssertEqual(session("a"), first)
        XCTAssertEqual(session("b"), first, "59,999 ms idle")
        XCTAssertEqual(session("c"), afterIdle)
        XCTAssertNotEqual(afterIdle, first, "60,000 ms idle")
        XCTAssertEqual(session("d"), afterMax)
        XCTAssertNotEqual(afterMax, afterIdle, "600,000 ms since the session's first event")
        XCTAssertEqual(Set(stored.filter { $0["name"]?.stringValue == "busy" }.compactMap { $0["session_id"]?.stringValue }),
                       [afterIdle])
    }
}
