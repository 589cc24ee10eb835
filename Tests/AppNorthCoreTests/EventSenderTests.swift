import XCTest
@testable import AppNorthCore

/// Who events are from (`EventSender`): identity and session, and the
/// tail every event carries. No queue, server or file.
final class EventSenderTests: XCTestCase {
    func sender() throws -> EventSender {
        EventSender(identity: try Identity(store: MemorySecureStore(), clock: ManualClock()), sessionID: "s1")
    }

    func tailJSON(_ sender: EventSender) throws -> JSON {
        // The tail continues an object that the event's first members open.
        let text = #"{"id":"x""# + String(decoding: sender.tail.bytes, as: UTF8.self) + "{}}"
        return try JSON.parse(text)
    }

    func testTheTailCarriesTheIdentityAndTheSession() throws {
        let sender = try sender()
        let json = try tailJSON(sender)
        XCTAssertEqual(json["anonymous_id"]?.stringValue, sender.identity.anonymousID)
        XCTAssertTrue(json["user_id"]?.isNull ?? false)
        XCTAssertEqual(json["session_id"]?.stringValue, "s1")
    }

    func testEveryChangeRebuildsTheTailAndMovesTheGeneration() throws {
        let sender = try sender()
        var generation = sender.tail.generation
        try sender.identify("user-7")
        XCTAssertGreaterThan(sender.tail.generation, generation)
        XCTAssertEqual(try tailJSON(sender)["user_id"]?.stringValue, "user-7")
        generation = sender.tail.generation
        sender.newSession("s2", nowMs: 0)
        XCTAssertGreaterThan(sender.tail.generation, generation)
        XCTAssertEqual(try tailJSON(sender)["session_id"]?.stringValue, "s2")
        XCTAssertEqual(sender.sessionID, "s2")
        try sender.identify(nil)
        XCTAssertTrue(try tailJSON(sender)["user_id"]?.isNull ?? false, "reset clears the user id")
        XCTAssertEqual(try tailJSON(sender)["anonymous_id"]?.stringValue, sender.identity.anonymousID, "the anonymous id stays")
    }
}
