@testable import AppNorthCore

extension EventStore {
    /// Journals events named `e<i>` (ids at `firstMs + i` ms) into stripe
    /// `index`, as `track` does; they reach SQLite at the next drain.
    func journalForTests(_ indexes: some Sequence<Int>, firstMs: Int64, stripe index: Int = 0) throws {
        let stripe = journal.stripes[index]
        try stripe.state.withLock { s throws(AppNorthError) in
            for i in indexes {
                let ms = firstMs + Int64(i)
                try s.buffer.set(EventPayload.build(id: Random.uuidV7(unixMilliseconds: ms), name: "e\(i)", timestampMs: ms,
                                              propertiesJSON: #"{"n":1}"#, anonymousID: "anon", userID: nil, sessionID: "s"))
                try journal.append(&s, of: stripe)
            }
            journal.publish(stripe)
        }
    }
}
