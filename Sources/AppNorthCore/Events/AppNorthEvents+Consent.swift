/// The consent half of the event queue's API (held by `EventConsent`).
extension AppNorthEvents {
    package var consent: ConsentState { consentOwner.current }

    /// Persists the choice and announces it to every other handle on the
    /// data directory, in this process or another (ConsentWatch), which
    /// acts on it as if it had made it.
    ///
    /// Granting queues only events tracked from then on. Revoking purges
    /// the queue, and once it returns nothing tracked before it is sent, by
    /// any handle on the directory: the upload in progress here is
    /// cancelled and its batch never retried; a `track` racing the
    /// revocation is waited for and purged; other handles' journaled events
    /// can no longer enter the table (their journals carry the old consent
    /// epoch) and are purged; and the call waits (up to 10 s) for upload
    /// attempts other handles started before it to end. Those are let
    /// finish rather than cancelled: their events had left before the
    /// revocation, and an aborted request may still be stored by the server,
    /// so only waiting lets "returned" mean "nothing more arrives". No
    /// attempt starts after it. In the other handles, a `track` that starts
    /// after this call returned is dropped; one that raced it is purged.
    package func setConsent(analytics granted: Bool) throws(AppNorthError) {
        try requireOpen()
        try consentOwner.set(analytics: granted)
        // A retry delay in progress ends now (`StoreUploadWorld.sleep`).
        if !granted { uploader.wake() }
    }
}
