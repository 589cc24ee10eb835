import XCTest
@testable import AppNorthCore

/// The consent owner (`EventConsent`) of a queue on a fresh folder: the
/// flag `track` reads, the generation, and the request a revocation
/// cancels. No upload is made (nothing is flushed).
final class EventConsentTests: EventsTestCase {
    func testARevocationCancelsTheRequestInFlightAndRefusesItsBatch() throws {
        let events = try open(quiet())
        defer { events.close(timeoutMilliseconds: 0) }
        let consent = events.consentOwner
        XCTAssertTrue(consent.trackingAllowed.load(ordering: .acquiring), "unknown, consent not required: events go in")
        let generation = consent.uploadGate.generation
        let request = try XCTUnwrap(consent.beginAttempt(generation))
        try consent.set(analytics: false)
        XCTAssertTrue(request.isCancelled, "the request in flight is cancelled")
        XCTAssertFalse(consent.trackingAllowed.load(ordering: .acquiring))
        XCTAssertTrue(consent.endAttempt(generation), "its batch is left alone")
        XCTAssertNil(consent.beginAttempt(generation), "no attempt of a batch read before it")
        XCTAssertFalse(consent.uploadGate.allowed)
        try consent.set(analytics: true)
        XCTAssertTrue(consent.trackingAllowed.load(ordering: .acquiring))
        XCTAssertEqual(events.consent, .granted)
        XCTAssertNotNil(consent.beginAttempt(consent.generation))
        XCTAssertFalse(consent.endAttempt(consent.generation))
    }

    func testAnotherHandlesRevocationIsAdoptedAtTheNextCheck() throws {
        let first = try open(quiet())
        let second = try open(quiet())
        defer { first.close(timeoutMilliseconds: 0); second.close(timeoutMilliseconds: 0) }
        let generation = second.consentOwner.generation
        try first.setConsent(analytics: false)
        XCTAssertNil(second.consentOwner.beginAttempt(generation), "the shared counter moved: no attempt before adoption")
        XCTAssertEqual(second.consent, .revoked, "adopted when read")
        XCTAssertGreaterThan(second.consentOwner.generation, generation)
        XCTAssertFalse(second.consentOwner.trackingAllowed.load(ordering: .acquiring))
    }

    func testNoAttemptBeginsOnceClosed() throws {
        let events = try open(quiet())
        let consent = events.consentOwner
        events.close(timeoutMilliseconds: 0)
        XCTAssertNil(consent.beginAttempt(consent.generation))
    }
}
