/// Consent as a value: the choice, and what an upload checks against it.
/// No lock, file or thread inside (`EventConsent` holds one under its
/// lock), so tests drive it with plain values (ConsentGateTests).
///
/// `generation` moves on every revocation, here or adopted from another
/// handle: a batch read under one generation is never sent under another.
/// `revocationsAdopted` is the shared revocation counter (`ConsentWatch`)
/// as of this handle's last adoption: an attempt goes only while the
/// counter still reads so.
struct ConsentGate: Sendable, Equatable {
    private(set) var choice: ConsentState
    private(set) var generation: UInt64 = 0
    private(set) var revocationsAdopted: UInt64
    /// `AppNorthEventsOptions.requireConsent`: an unknown choice then lets nothing in.
    let requireConsent: Bool

    init(choice: ConsentState, revocationsAdopted: UInt64, requireConsent: Bool) {
        self.choice = choice
        self.revocationsAdopted = revocationsAdopted
        self.requireConsent = requireConsent
    }

    /// Whether events are let in (and uploaded).
    var allowsTracking: Bool { choice == .granted || (choice == .unknown && !requireConsent) }

    /// A grant, or a stored choice adopted as it is.
    mutating func set(_ value: ConsentState) { choice = value }

    /// A revocation, this handle's or one adopted: nothing read before it goes out.
    mutating func revoke() {
        choice = .revoked
        generation &+= 1
    }

    /// The stored choice after another handle's change, and the revocation
    /// counter it was read under (a revocation among the changes was
    /// acted on first: `revoke`).
    mutating func adopt(_ stored: ConsentState, revocations: UInt64) {
        choice = stored
        revocationsAdopted = revocations
    }

    /// Whether an attempt of a batch read under `batchGeneration` may go,
    /// the shared revocation counter reading `revocationsNow`.
    func mayAttempt(_ batchGeneration: UInt64, revocationsNow: UInt64) -> Bool {
        generation == batchGeneration && revocationsAdopted == revocationsNow
    }
}
