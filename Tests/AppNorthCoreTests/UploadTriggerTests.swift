import XCTest
import Glibc
@testable import AppNorthCore

/// What starts an upload after a failure, and which events a 400 that
/// names none of them costs (issue 24), through the real dev server.
final class UploadTriggerTests: EventsTestCase {
    override func tearDown() {
        try? TestServer.post("/admin/settings", #"{"poisoned_event_names":[]}"#)
        super.tearDown()
    }

    func poison(_ names: [String]) throws {
        let list = names.map { "\"\($0)\"" }.joined(separator: ",")
        try TestServer.post("/admin/settings", #"{"poisoned_event_names":[\#(list)]}"#)
    }

    func stats(_ events: AppNorthEvents) throws -> JSON { try JSON.parse(events.statsJSON()) }

    /// The event uploads the server logged, oldest first, with the
    /// monotonic milliseconds each started at.
    func eventPostTimes() throws -> [Double] {
        try (TestServer.get("/admin/requests")["requests"]?.arrayElements ?? []).filter {
            $0["method"]?.stringValue == "POST" && $0["path"]?.stringValue == "/v1/apps/swift/events"
        }.compactMap { $0["mono_ms"]?.doubleValue }
    }

    /// One poisoned event among 19 good ones: the 400 names no event, so
    /// the batch is sent in halves until only the poisoned one is refused.
    func testAFourHundredNamingNoEventDropsOnlyThePoisonedOne() throws {
        try poison(["poison"])
        let events = try open(quiet { $0.batchThreshold = 20 })
        for i in 0..<9 { try events.track("good\(i)") }
        try events.track("poison")
        for i in 9..<19 { try events.track("good\(i)") }
        XCTAssertTrue(try eventually { try serverEvents().count == 19 && events.queuedCount == 0 })
        XCTAssertEqual(Set(try serverEvents().compactMap { $0["name"]?.stringValue }), Set((0..<19).map { "good\($0)" }))
        let s = try stats(events)
        XCTAssertEqual(s["dropped"]?["client_error"]?.intValue, 1)
        XCTAssertEqual(s["breaker"]?["consecutive_failures"]?.intValue, 0, "part of the batch went: not a failed flush")
        events.close(timeoutMilliseconds: 0)
    }

    /// After a batch the server refused whole (400), the next 20 events go
    /// at once, not at the 30 s timer (here an hour).
    func testAfterADiscardedBatchTheNextTwentyGoAtOnce() throws {
        try poison(["poison"])
        let events = try open(quiet { $0.batchThreshold = 20 })
        for _ in 0..<20 { try events.track("poison") }
        XCTAssertTrue(try eventually { try stats(events)["dropped"]?["client_error"]?.intValue == 20 })
        XCTAssertEqual(try stats(events)["breaker"]?["consecutive_failures"]?.intValue, 1, "a discarded batch is a failed flush")
        for i in 0..<20 { try events.track("good\(i)") }
        XCTAssertTrue(try eventually { try serverEvents().count == 20 }, "the 20 new events went without a flush call")
        events.close(timeoutMilliseconds: 0)
    }

    /// After a 503 that outlasted the retries, 20 new events start the next
    /// cycle, but no sooner than the retry schedule's backoff after the
    /// failed one (the first failed flush: one base delay).
    func testAfterAServerErrorTwentyNewEventsStartACycleAfterTheBackoff() throws {
        let base = 300
        let events = try open(quiet {
            $0.batchThreshold = 20
            $0.retry.baseMilliseconds = base
            $0.retry.jitter = 0
        })
        try failEventPosts(count: 4)  // the first attempt and its 3 retries
        for i in 0..<20 { try events.track("first\(i)") }
        XCTAssertTrue(try eventually { try stats(events)["breaker"]?["consecutive_failures"]?.intValue == 1 })
        for i in 0..<20 { try events.track("second\(i)") }
        var times: [Double] = []
        XCTAssertTrue(try eventually { try serverEvents().count == 40 }, "the 20 new events started a cycle")
        times = try eventPostTimes()
        XCTAssertGreaterThanOrEqual(times.count, 5)
        if times.count >= 5 {
            XCTAssertGreaterThanOrEqual(times[4] - times[3], Double(base) * 0.9,
                                        "the next cycle waited out the backoff after the failed one")
        }
        events.close(timeoutMilliseconds: 0)
    }

    /// While uploads fail, events below the next trigger do not wake the
    /// uploader: nothing is sent until 20 more than the failure left.
    func testFewerThanTwentyNewEventsAfterAFailureWaitForTheTimer() throws {
        let events = try open(quiet { $0.batchThreshold = 20 })
        try failEventPosts(count: 4)
        for i in 0..<20 { try events.track("first\(i)") }
        XCTAssertTrue(try eventually { try stats(events)["breaker"]?["consecutive_failures"]?.intValue == 1 })
        let posts = try eventPosts()
        for i in 0..<19 { try events.track("second\(i)") }
        sleepMilliseconds(300)
        XCTAssertEqual(try eventPosts(), posts, "19 new events do not start a cycle")
        try events.track("second19")
        XCTAssertTrue(try eventually { try serverEvents().count == 40 })
        events.close(timeoutMilliseconds: 0)
    }
}
