import XCTest
@testable import AppNorthCore

/// Consent as a value (`ConsentGate`): no lock, file, thread or server.
final class ConsentGateTests: XCTestCase {
    func testWhatEachChoiceLetsIn() {
        XCTAssertTrue(ConsentGate(choice: .granted, revocationsAdopted: 0, requireConsent: true).allowsTracking)
        XCTAssertFalse(ConsentGate(choice: .revoked, revocationsAdopted: 0, requireConsent: false).allowsTracking)
        XCTAssertTrue(ConsentGate(choice: .unknown, revocationsAdopted: 0, requireConsent: false).allowsTracking)
        XCTAssertFalse(ConsentGate(choice: .unknown, revocationsAdopted: 0, requireConsent: true).allowsTracking,
                       "an unknown choice lets nothing in when consent is required")
    }

    func testARevocationEndsEveryBatchReadBeforeIt() {
        var gate = ConsentGate(choice: .granted, revocationsAdopted: 3, requireConsent: false)
        let before = gate.generation
        XCTAssertTrue(gate.mayAttempt(before, revocationsNow: 3))
        gate.revoke()
        XCTAssertEqual(gate.choice, .revoked)
        XCTAssertFalse(gate.allowsTracking)
        XCTAssertFalse(gate.mayAttempt(before, revocationsNow: 3), "a batch read before the revocation never goes")
        XCTAssertTrue(gate.mayAttempt(gate.generation, revocationsNow: 3))
        gate.set(.granted)
        XCTAssertTrue(gate.allowsTracking)
        XCTAssertFalse(gate.mayAttempt(before, revocationsNow: 3), "nor after a later grant")
    }

    func testAnotherHandlesRevocationStopsAttemptsUntilAdopted() {
        var gate = ConsentGate(choice: .granted, revocationsAdopted: 3, requireConsent: false)
        let generation = gate.generation
        XCTAssertFalse(gate.mayAttempt(generation, revocationsNow: 4), "the shared counter moved: not adopted yet")
        gate.revoke()
        gate.adopt(.granted, revocations: 4)
        XCTAssertEqual(gate.choice, .granted, "the stored choice, a later grant, takes over")
        XCTAssertEqual(gate.revocationsAdopted, 4)
        XCTAssertFalse(gate.mayAttempt(generation, revocationsNow: 4))
        XCTAssertTrue(gate.mayAttempt(gate.generation, revocationsNow: 4))
    }
}
