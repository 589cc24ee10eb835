import XCTest
@testable import AppNorthCore

final class SupportTests: XCTestCase {
    func testSaturatingArithmetic() {
        XCTAssertEqual(Int64.max.addingSaturating(1), .max)
        XCTAssertEqual(Int64.min.addingSaturating(-1), .min)
        XCTAssertEqual(Int64.min.subtractingSaturating(1), .min)
        XCTAssertEqual(Int64.max.subtractingSaturating(-1), .max)
        XCTAssertEqual(Int64(0).subtractingSaturating(.min), .max)
        XCTAssertEqual(Int64(9_223_372_036_854_776).multipliedSaturating(by: 1000), .max)
        XCTAssertEqual(Int64(-9_223_372_036_854_776).multipliedSaturating(by: 1000), .min)
        XCTAssertEqual(UInt64.max.addingSaturating(1), .max)
        XCTAssertEqual(UInt64(0).subtractingSaturating(1), 0)
        XCTAssertEqual(Int64(6).multipliedSaturating(by: 7), 42)
    }

    func testManualClockSaturatesInsteadOfTrapping() {
        let clock = ManualClock()
        clock.advance(milliseconds: -5)
        XCTAssertEqual(clock.wallMilliseconds(), 1_700_000_000_000, "a clock never moves back")
        clock.advance(milliseconds: .max)
        XCTAssertEqual(clock.wallMilliseconds(), .max)
        XCTAssertEqual(clock.monotonicNanoseconds(), .max)
        clock.advance(milliseconds: .max)
        XCTAssertEqual(clock.monotonicNanoseconds(), .max)
        clock.setWall(milliseconds: .min)
        clock.advance(milliseconds: 1)
        XCTAssertEqual(clock.wallMilliseconds(), .min + 1)
    }

    func testDamagedIdentityValuesAreReplacedAndLogged() throws {
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .debug) { _, message in lines.withLock { $0.append(message) } }
        for (anonymous, user) in [("", ""), (String(repeating: "x", count: 257), ""), ("a\u{0}b", "a\u{0}b"),
                                  ("line\nbreak", String(repeating: "y", count: 300))] {
            let store = MemorySecureStore()
            try store.write(Identity.anonymousKey, anonymous)
            try store.write(Identity.userKey, user)
            lines.withLock { $0 = [] }
            let identity = try Identity(store: store, clock: ManualClock(), logger: logger)
            XCTAssertEqual(identity.anonymousID.count, 36, "a fresh UUID replaces \(anonymous.debugDescription)")
            XCTAssertEqual(try store.read(Identity.anonymousKey), identity.anonymousID)
            XCTAssertNil(identity.userID)
            XCTAssertTrue(lines.withLock { $0.contains { $0.contains("damaged anonymous id") } })
            XCTAssertTrue(lines.withLock { $0.contains { $0.contains("damaged user id") } })
        }
        let sound = MemorySecureStore()
        try sound.write(Identity.anonymousKey, "kept")
        try sound.write(Identity.userKey, "user-1")
        let identity = try Identity(store: sound, clock: ManualClock(), logger: logger)
        XCTAssertEqual(identity.anonymousID, "kept")
        XCTAssertEqual(identity.userID, "user-1")
    }

    func testPercentEncoding() {
        XCTAssertEqual(Text.percentEncoded("a b&c=d/é~"), "a%20b%26c%3Dd%2F%C3%A9~")
    }

    func testDecodeCRefusesInvalidUTF8() {
        let bad: [CChar] = [0x61, CChar(bitPattern: 0xFF), 0]
        XCTAssertThrowsError(try bad.withUnsafeBufferPointer { try Text.decodeC($0.baseAddress!, what: "x") }) {
            XCTAssertEqual($0 as? AppNorthError, .invalidUTF8("x is not valid UTF-8"))
        }
        let good: [CChar] = [0x61, 0]
        XCTAssertEqual(try good.withUnsafeBufferPointer { try Text.decodeC($0.baseAddress!, what: "x") }, "a")
    }

    func testUUIDv7LayoutAndOrder() {
        let a = Random.uuidV7(unixMilliseconds: 1_700_000_000_000)
        let b = Random.uuidV7(unixMilliseconds: 1_700_000_000_001)
        XCTAssertEqual(a.count, 36)
        let chars = Array(a)
        XCTAssertEqual(chars[14], "7", a)
        XCTAssertTrue("89ab".contains(chars[19]), a)
        XCTAssertLessThan(a, b)
        XCTAssertTrue(a.hasPrefix("018bcfe5-6800"), a)
    }

    func testManualClockMovesOnlyWhenTold() {
        let clock = ManualClock()
        let start = clock.monotonicNanoseconds()
        XCTAssertEqual(clock.monotonicNanoseconds(), start)
        clock.advance(milliseconds: 1500)
        XCTAssertEqual(clock.monotonicNanoseconds() - start, 1_500_000_000)
        clock.setWall(milliseconds: 0)
        XCTAssertEqual(clock.wallMilliseconds(), 0)
        XCTAssertEqual(clock.monotonicNanoseconds() - start, 1_500_000_000, "wall jumps leave monotonic time alone")
    }

    func testHTTPStatusMapping() {
        XCTAssertEqual(AppNorthError.fromHTTP(status: 400, message: "m"), .validation("m", httpStatus: 400))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 422, message: "m"), .validation("m", httpStatus: 422))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 401, message: "m"), .authentication("m", httpStatus: 401))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 403, message: "m"), .authentication("m", httpStatus: 403))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 404, message: "m"), .notFound("m"))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 409, message: "m"), .conflict("m"))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 413, message: "m"), .tooLarge("m", httpStatus: 413))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 503, message: "m"), .server("m", httpStatus: 503))
        XCTAssertEqual(AppNorthError.fromHTTP(status: 429, message: "m"), .http("m", httpStatus: 429))
        XCTAssertEqual(AppNorthError.server("m", httpStatus: 502).httpStatus, 502)
        XCTAssertEqual(AppNorthError.network("m").httpStatus, 0)
    }

    func testConfigurationValidation() throws {
        XCTAssertEqual(try AppNorthClientConfiguration.validatedURL("https://api.example.com/"), "https://api.example.com")
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedURL("api.example.com"))
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedURL("http://:80"))
        let longest = "http://h/" + String(repeating: "p", count: AppNorthClientConfiguration.maxURLBytes - 9)
        XCTAssertEqual(try AppNorthClientConfiguration.validatedURL(longest), longest)
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedURL(longest + "p")) {
            guard case AppNorthError.tooLarge = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedURL("http://h/?q=1"))
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedAppID(String(repeating: "a", count: 129)))
        XCTAssertThrowsError(try AppNorthClientConfiguration.validatedAppID("a/b"))
        let configuration = try AppNorthClientConfiguration(
            apiURL: "http://h", appID: "app", credential: AppNorthCredential(email: "Ada@Example.COM", token: "t"),
            allowCleartextHosts: ["h"])
        XCTAssertEqual(configuration.scope, "http://h|app|ada@example.com")
        XCTAssertEqual(try AppNorthClientConfiguration(apiURL: "http://h", appID: "app").scope, "http://h|app|anonymous")
        XCTAssertThrowsError(try AppNorthClientConfiguration(
            apiURL: "http://h", appID: "app", credential: AppNorthCredential(email: "a@b", token: "has space"),
            allowCleartextHosts: ["h"]))
    }

    func testIdeaQueryParsing() throws {
        let query = try IdeaQuery(json: #"{"board":"b1","q":"dark mode","status":"open","cursor":"c","limit":5}"#)
        XCTAssertEqual(query, IdeaQuery(board: "b1", search: "dark mode", status: "open", cursor: "c", limit: 5))
        XCTAssertEqual(query.queryString, "?board=b1&q=dark%20mode&status=open&cursor=c&limit=5")
        XCTAssertEqual(try IdeaQuery(json: nil), IdeaQuery())
        XCTAssertThrowsError(try IdeaQuery(json: #"{"bord":"x"}"#))
        XCTAssertThrowsError(try IdeaQuery(json: #"{"limit":0}"#))
        XCTAssertThrowsError(try IdeaQuery(json: #"{"status":"later"}"#))
        XCTAssertNotEqual(IdeaQuery(search: "a").cacheKey, IdeaQuery(search: "b").cacheKey)
        XCTAssertEqual(IdeaQuery(search: "a", cursor: "p2").cacheKey, IdeaQuery(search: "a").cacheKey,
                       "cursors are never part of cached reads")
    }

    func testLoggerCopiesShareTheirLevelAndSkipDisabledLines() {
        let lines = Lock<[String]>([], level: LockClass.test)
        let logger = Logger(minimum: .warning) { _, line in lines.withLock { $0.append(line) } }
        let copy = logger
        var formatted = 0
        copy.log(.debug, { formatted += 1; return "hidden" }())
        XCTAssertEqual(formatted, Logger.debugFromEnvironment ? 1 : 0, "a disabled line is never formatted")
        logger.setMinimum(.debug)
        XCTAssertTrue(copy.enabled(.debug))
        copy.log(.debug, "shown")
        XCTAssertTrue(lines.withLock { $0 }.contains("shown"))
        XCTAssertFalse(Logger.silent.enabled(.error) && !Logger.debugFromEnvironment)
    }

    func testRequestTracesShowThePathWithoutHostOrQuery() {
        XCTAssertEqual(RequestTrace.path(of: "http://127.0.0.1:8080/v1/apps/demo/ideas?q=secret"), "/v1/apps/demo/ideas")
        XCTAssertEqual(RequestTrace.path(of: "https://api.example.com"), "/")
        XCTAssertEqual(RequestTrace.path(of: "https://h/a#frag"), "/a")
        XCTAssertEqual(RequestTrace.path(of: ""), "/")
    }
}
