import XCTest
@testable import AppNorthCore

/// The track gate (`EventTracker`) of a queue on a fresh folder: what it
/// refuses, what it counts as dropped, and that it wakes the uploader at
/// the threshold. Nothing is uploaded unless the test flushes.
final class EventTrackerTests: EventsTestCase {
    func track(_ tracker: EventTracker, _ name: String, _ properties: String? = nil) throws -> Bool {
        var name = name
        return try EventTracker.withBytes(&name) { name throws(AppNorthError) in
            guard var properties else { return try tracker.track(utf8: name, properties: nil) }
            return try EventTracker.withBytes(&properties) { p throws(AppNorthError) in
                try tracker.track(utf8: name, properties: p)
            }
        }
    }

    func testAnEventGoesIntoTheJournal() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 0) }
        XCTAssertTrue(try track(events.tracker, "a", #"{"k":1}"#))
        XCTAssertEqual(events.store.journaled, 1)
        XCTAssertEqual(events.queuedCount, 1)
    }

    func testWithoutConsentAnEventIsDroppedAndCounted() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 0) }
        try events.setConsent(analytics: false)
        XCTAssertFalse(try track(events.tracker, "a"))
        XCTAssertEqual(events.queuedCount, 0)
        XCTAssertEqual(events.counters.snapshot(adding: [:]).dropped(.consent), 1)
    }

    func testAnOversizeEventAndAClosedQueueAreRefused() throws {
        let events = try open(quiet { $0.maxEventBytes = 400 })
        let big = #"{"k":""# + String(repeating: "x", count: 500) + #""}"#
        XCTAssertThrowsError(try track(events.tracker, "a", big)) { error in
            guard case .tooLarge = error as? AppNorthError else { return XCTFail("\(error)") }
        }
        events.close(timeoutMilliseconds: 0)
        XCTAssertThrowsError(try track(events.tracker, "a")) { error in
            guard case .wrongState = error as? AppNorthError else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(events.counters.snapshot(adding: [:]).dropped(.consent), 0, "a closed queue drops nothing as consent")
    }

    func testTheThresholdWakesTheUploader() throws {
        let events = try open(quiet { $0.batchThreshold = 3 })
        defer { events.close(timeoutMilliseconds: 0) }
        XCTAssertTrue(eventually { events.uploader.wakeAt.load(ordering: .relaxed) == 3 }, "the thread sleeps, to be woken at 3")
        for i in 0..<3 { XCTAssertTrue(try track(events.tracker, "e\(i)")) }
        // No flush and no timer (an hour): only the wake-up uploads them.
        XCTAssertTrue(try eventually { try serverEvents().count == 3 })
    }
}
