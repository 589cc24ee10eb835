import Glibc
import Synchronization
import XCTest
@testable import AppNorthCore

/// The remote config's pure parts, driven directly: no server, no sleeps
/// (except where a test is about threads).
final class ConfigPolicyTests: XCTestCase {
    // MARK: Backoff

    func testBackoffDoublesFromTheBaseUpToTheCap() {
        let backoff = Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000)
        XCTAssertEqual((1...8).map { backoff.ceiling(attempt: $0) },
                       [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000])
        XCTAssertEqual(backoff.ceiling(attempt: 1_000_000), 60_000, "no overflow on long outages")
        XCTAssertEqual(Backoff.default, Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000, jitter: 0.5))
    }

    func testBackoffJitterRemovesUpToHalfTheDelay() {
        let backoff = Backoff(baseMilliseconds: 1000, maxMilliseconds: 60_000)
        XCTAssertEqual(backoff.delay(attempt: 3, random: 0), 4000)
        XCTAssertEqual(backoff.delay(attempt: 3, random: 0.5), 3000)
        XCTAssertEqual(backoff.delay(attempt: 3, random: 0.999_999), 2000)
        for _ in 0..<200 {
            let delay = backoff.delay(attempt: 2, random: Random.unit())
            XCTAssertTrue((1000...2000).contains(delay), "\(delay)")
        }
        XCTAssertEqual(Backoff(baseMilliseconds: 100, maxMilliseconds: 100, jitter: 0).delay(attempt: 9, random: 0.7), 100)
    }

    // MARK: Server-Sent Events

    private let sample = Array("id: 3\nevent: config\ndata: {\"version\":3,\"config\":{\"price\":9.99,\"name\":\"é\"}}\n\n: keepalive\n\n".utf8)

    func testSSEParsesAnEventWholeOrSplitAtEveryByte() {
        var whole = ServerSentEventParser()
        let events = whole.feed(sample)
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?.type, "config")
        XCTAssertEqual(events.first?.lastEventID, "3")
        XCTAssertEqual(events.first?.text, #"{"version":3,"config":{"price":9.99,"name":"é"}}"#)
        for split in 1..<sample.count {
            var parser = ServerSentEventParser()
            let got = parser.feed(sample[..<split]) + parser.feed(sample[split...])
            XCTAssertEqual(got, events, "split at byte \(split)")
        }
        var bytewise = ServerSentEventParser()
        XCTAssertEqual(sample.flatMap { bytewise.feed([$0]) }, events)
    }

    func testSSELineEndingsMultilineDataCommentsAndRetry() {
        var parser = ServerSentEventParser()
        var events = parser.feed(Array(": hello\r\nretry: 2500\r\ndata: a\r\ndata:b\r\rdata: c\r".utf8))
        events += parser.feed(Array("\n\n".utf8))  // CR then LF in another chunk is one line end
        XCTAssertEqual(events.map(\.text), ["a\nb", "c"])
        XCTAssertEqual(events.map(\.type), ["message", "message"])
        XCTAssertEqual(parser.retryMilliseconds, 2500)
        XCTAssertEqual(parser.feed(Array("data\n\n".utf8)).map(\.text), [""], "a field without colon has an empty value")
        XCTAssertEqual(parser.feed(Array("event: x\n\n".utf8)), [], "no data: no event")
    }

    func testSSEIdCarriesOverAndIgnoresNUL() {
        var parser = ServerSentEventParser()
        let events = parser.feed(Array("id: 7\ndata: a\n\ndata: b\n\nid: 8\u{0}\ndata: c\n\n".utf8))
        XCTAssertEqual(events.map(\.lastEventID), ["7", "7", "7"])
    }

    func testSSESkipsAByteOrderMarkAndDropsOversizeEvents() {
        var parser = ServerSentEventParser(maxEventBytes: 16)
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        XCTAssertEqual(parser.feed(bom + Array("data: ok\n\n".utf8)).map(\.text), ["ok"])
        XCTAssertEqual(parser.feed(Array("data: 0123456789abcdefghij\n\ndata: next\n\n".utf8)).map(\.text), ["next"])
    }

    func testSSECountsAnOversizeEventTheMomentTheLimitIsPassed() {
        var parser = ServerSentEventParser(maxEventBytes: 16)
        XCTAssertEqual(parser.feed(Array("data: 0123456789".utf8)), [])
        XCTAssertEqual(parser.oversizeEvents, 0)
        // A line that never ends: counted once, while it is still arriving.
        XCTAssertEqual(parser.feed([UInt8](repeating: 0x78, count: 1000)), [])
        XCTAssertEqual(parser.oversizeEvents, 1)
        XCTAssertEqual(parser.feed([UInt8](repeating: 0x78, count: 1000)), [])
        XCTAssertEqual(parser.oversizeEvents, 1)
        XCTAssertEqual(parser.feed(Array("\n\ndata: ok\n\n".utf8)).map(\.text), ["ok"])
        // Many data lines that add up past the limit count too.
        XCTAssertEqual(parser.feed(Array("data: 0123456\ndata: 0123456\ndata: 0123456\n\n".utf8)), [])
        XCTAssertEqual(parser.oversizeEvents, 2)
    }

    // MARK: Exact JSON text

    func testMemberSpansKeepTheServedText() throws {
        let text = #" { "price" : 9.99 , "n":1.50, "s":"a\"}b", "nested":{"x":[1,{"y":"}"}]}, "k\u00e9y":true } "#
        let bytes = Array(text.utf8)
        let members = try XCTUnwrap(JSONText.objectMembers(bytes, in: JSONText.valueRange(bytes)))
        XCTAssertEqual(members.map(\.key), ["price", "n", "s", "nested", "kéy"])
        XCTAssertEqual(members.map { String(decoding: bytes[$0.value], as: UTF8.self) },
                       ["9.99", "1.50", #""a\"}b""#, #"{"x":[1,{"y":"}"}]}"#, "true"])
        XCTAssertNil(JSONText.objectMembers(Array("[1]".utf8)))
    }

    func testConfigDocumentReadsTypesAndKeepsNumbers() throws {
        let doc = try ConfigDocument(text: #"{"s":"x","i":42,"r":9.99,"whole":3.0,"b":false,"z":null,"o":{"p":1.50},"a":[1]}"#,
                                     what: "test")
        XCTAssertEqual(doc.value("s"), .string("x"))
        XCTAssertEqual(doc.value("i"), .integer(42))
        XCTAssertEqual(doc.value("r"), .real(9.99))
        XCTAssertEqual(doc.value("whole"), .real(3.0))
        XCTAssertEqual(doc.value("b"), .bool(false))
        XCTAssertEqual(doc.value("z"), .null)
        XCTAssertEqual(doc.valueText("o"), #"{"p":1.50}"#)
        XCTAssertEqual(doc.valueText("r"), "9.99")
        XCTAssertNil(doc.value("missing"))
        XCTAssertEqual(doc.keys, ["s", "i", "r", "whole", "b", "z", "o", "a"])
        XCTAssertThrowsError(try ConfigDocument(text: "[1]", what: "test"))
        XCTAssertThrowsError(try ConfigDocument(text: "{nope", what: "test"))
        XCTAssertThrowsError(try ConfigDocument(bytes: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], what: "test"),
                             "invalid UTF-8 is refused")
    }

    func testDuplicateKeysResolveLikeJansson() throws {
        let doc = try ConfigDocument(text: #"{"a":1,"b":2,"a":3}"#, what: "test")
        XCTAssertEqual(doc.value("a"), .integer(3))
        XCTAssertEqual(doc.valueText("a"), "3")
        XCTAssertEqual(doc.keys, ["b", "a"])
    }

    func testChangedKeysCompareValuesAsJSON() throws {
        let old = try ConfigDocument(text: #"{"a":1,"b":{"x":1,"y":2},"c":1.5,"d":"gone","e":1}"#, what: "old")
        let new = try ConfigDocument(text: #"{ "a":1, "b":{"y":2,"x":1}, "c":1.50, "e":1.0, "f":true }"#, what: "new")
        XCTAssertEqual(new.changedKeys(from: old), ["e", "f", "d"])
        XCTAssertEqual(new.changedKeys(from: new), [])
        XCTAssertEqual(ConfigChange(config: "{}", changedKeys: ["a", "q\""], tier: .remote).changedKeysJSON, #"["a","q\""]"#)
    }

    // MARK: TTL

    func testFreshnessUsesMonotonicAge() {
        let rule = ConfigFreshness(ttlSeconds: 3600)
        XCTAssertTrue(rule.isFresh(fetchedMonotonic: 0, nowMonotonic: 3_599_999_000_000))
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: 0, nowMonotonic: 3_600_000_000_000))
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: nil, nowMonotonic: 5), "never fetched counts as expired")
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: 10, nowMonotonic: 5), "a fetch time ahead of now is not fresh")
    }

    func testCachedCopyAgeComesFromTheWallClockOnceAtLoad() {
        // Stored 1000 s ago, loaded when the monotonic clock reads 5 s.
        let mono = ConfigFreshness.monotonicFetchTime(storedWallMilliseconds: 1_000_000, nowWallMilliseconds: 2_000_000,
                                                      nowMonotonic: 5_000_000_000)
        XCTAssertEqual(mono, 5_000_000_000 - 1_000_000_000_000)
        let rule = ConfigFreshness(ttlSeconds: 3600)
        XCTAssertTrue(rule.isFresh(fetchedMonotonic: mono, nowMonotonic: 5_000_000_000))
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: mono, nowMonotonic: 5_000_000_000 + 2_600_000_000_000))
        XCTAssertNil(ConfigFreshness.monotonicFetchTime(storedWallMilliseconds: 3_000_000, nowWallMilliseconds: 2_000_000,
                                                        nowMonotonic: 5), "stored in the future: expired")
    }

    func testBackoffWithExtremeSettingsNeverTraps() {
        let backoff = Backoff(baseMilliseconds: .max, maxMilliseconds: .max, jitter: .nan)
        for attempt in [Int.min, 0, 1, 2, 62, 63, 64, Int.max] {
            XCTAssertGreaterThan(backoff.delay(attempt: attempt, random: 0), 0)
            XCTAssertGreaterThan(backoff.delay(attempt: attempt, random: .nan), 0)
        }
    }

    func testExtremeStoredAndClockTimesAreExpiredNotATrap() {
        for (stored, now) in [(Int64.min, Int64.max), (Int64.max, Int64.min), (Int64.min + 1, 0), (0, Int64.max)] {
            XCTAssertNil(ConfigFreshness.monotonicFetchTime(storedWallMilliseconds: stored, nowWallMilliseconds: now,
                                                            nowMonotonic: .max))
        }
        let rule = ConfigFreshness(ttlSeconds: 3600)
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: .min, nowMonotonic: .max))
        XCTAssertFalse(rule.isFresh(fetchedMonotonic: .max, nowMonotonic: 0))
    }

    func testCacheRowWithAnImpossibleFetchTimeIsRefused() {
        for fetched in [Int64.min, -1, Int64.max] {
            let row = #"{"format":"appnorth.config-cache","version":1,"etag":null,"config_version":null,"#
                + #""fetched_ms":\#(fetched),"config":"{}"}"#
            XCTAssertThrowsError(try ConfigCache.decode(Array(row.utf8)), "fetched_ms \(fetched)")
        }
        let injected = #"{"format":"appnorth.config-cache","version":1,"etag":"\"1\"\r\nX-Evil: 1","config_version":1,"#
            + #""fetched_ms":1,"config":"{}"}"#
        // Issue 23: an ETag that is no entity tag is dropped, never the row.
        XCTAssertNil(try ConfigCache.decode(Array(injected.utf8)).etag, "an ETag with a line break never reaches a header")
    }

    // MARK: Cache rows

    func testCacheRowRoundTripsTheExactText() throws {
        let doc = try ConfigDocument(text: #"{"price":9.99}"#, what: "t")
        let bytes = ConfigCache.encode(.init(document: doc, etag: "\"4\"", version: 4, fetchedWallMilliseconds: 123))
        let back = try ConfigCache.decode(bytes)
        XCTAssertEqual(back.document.text, #"{"price":9.99}"#)
        XCTAssertEqual(back.etag, "\"4\"")
        XCTAssertEqual(back.version, 4)
        XCTAssertEqual(back.fetchedWallMilliseconds, 123)
        for corrupt in ["garbage", "{}", #"{"format":"other"}"#,
                        #"{"format":"appnorth.config-cache","version":1,"fetched_ms":1,"config":"[1]"}"#,
                        #"{"format":"appnorth.config-cache","version":99,"fetched_ms":1,"config":"{}"}"#,
                        #"{"format":"appnorth.config-cache","version":1,"config":"{}"}"#] {
            XCTAssertThrowsError(try ConfigCache.decode(Array(corrupt.utf8)), corrupt)
        }
    }

    // MARK: Listener registry

    func testRegistryDeliversInOrderToCurrentListeners() {
        let registry = ListenerRegistry<Int>()
        let seen = Lock<[String]>([], level: LockClass.test)
        let a = registry.add { n in seen.withLock { $0.append("a\(n)") } }!
        _ = registry.add { n in seen.withLock { $0.append("b\(n)") } }!
        registry.post(1)
        registry.post(2)
        registry.deliverPending()
        XCTAssertTrue(registry.remove(a))
        XCTAssertFalse(registry.remove(a), "a token is removed once")
        registry.post(3)
        registry.deliverPending()
        XCTAssertEqual(seen.withLock { $0 }, ["a1", "b1", "a2", "b2", "b3"])
    }

    func testRegistryRemoveFromInsideItsOwnCallbackReturnsAtOnce() {
        let registry = ListenerRegistry<Int>()
        let calls = Atomic<Int>(0)
        let token = Lock<Int64>(0, level: LockClass.test)
        let t = registry.add { _ in
            calls.add(1, ordering: .relaxed)
            XCTAssertTrue(registry.remove(token.withLock { $0 }))
        }!
        token.withLock { $0 = t }
        registry.post(1)
        registry.post(2)
        registry.deliverPending()
        XCTAssertEqual(calls.load(ordering: .relaxed), 1, "never called after remove")
    }

    func testRegistryRemoveWaitsForACallbackInFlightOnAnotherThread() throws {
        let registry = ListenerRegistry<Int>()
        let started = WakeSignal()
        let finished = Atomic<Bool>(false)
        let token = registry.add { _ in
            started.wake()
            sleepMilliseconds(200)
            finished.store(true, ordering: .releasing)
        }!
        registry.post(1)
        let deliverer = try BackgroundThread(name: "deliverer") { _ in registry.deliverPending() }
        XCTAssertTrue(started.wait(milliseconds: 2000))
        XCTAssertTrue(registry.remove(token))
        XCTAssertTrue(finished.load(ordering: .acquiring), "remove returned before the callback finished")
        deliverer.stop()
    }

    func testRegistryEventsPostedFromACallbackAreDeliveredAfterIt() {
        let registry = ListenerRegistry<Int>()
        let seen = Lock<[Int]>([], level: LockClass.test)
        _ = registry.add { n in
            seen.withLock { $0.append(n) }
            if n == 1 {
                registry.post(2)
                registry.deliverPending()  // reentrant: left to the outer loop
                seen.withLock { $0.append(-1) }
            }
        }
        registry.post(1)
        registry.deliverPending()
        XCTAssertEqual(seen.withLock { $0 }, [1, -1, 2])
    }

    func testRegistryCloseStopsDeliveries() {
        let registry = ListenerRegistry<Int>()
        let calls = Atomic<Int>(0)
        _ = registry.add { _ in
            calls.add(1, ordering: .relaxed)
            registry.close()  // from inside a callback: no wait, no deadlock
        }
        registry.post(1)
        registry.post(2)
        registry.deliverPending()
        XCTAssertEqual(calls.load(ordering: .relaxed), 1)
        XCTAssertNil(registry.add { _ in }, "closed")
    }
}
