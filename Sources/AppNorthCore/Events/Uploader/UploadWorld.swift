/// Everything the upload loop (`UploadLoop`) touches outside itself: the
/// queue (read, lease, settle), consent, the transport and the sleep. The
/// loop decides (batches, retries, status codes, splits, the breaker, the
/// counters); the world only does. The library's world is
/// `StoreUploadWorld`; tests give their own, with no store, server,
/// thread or clock (UploadLoopTests).
///
/// One attempt is `lease`, `send`, then (the first attempt of a batch)
/// `prefetch`, the work that overlaps the server's, then `receive`.
protocol UploadWorld {
    /// A request on its way (`send`), until its answer is taken (`receive`).
    associatedtype Sending

    /// The upload thread is asked to end.
    var isStopping: Bool { get }

    /// The consent generation a batch is read under, when uploads may go
    /// now (another handle's change adopted first); nil when consent does
    /// not let events out.
    mutating func consentGeneration() -> UInt64?

    /// The next batch of at most `size` rows: the one read ahead, if still
    /// what a read now would give, else the oldest rows (what the journal
    /// holds imported first). Empty when nothing is queued.
    mutating func readBatch(_ size: Int, _ generation: UInt64) throws(AppNorthError) -> PreparedBatch

    /// The journal still has parts to import (an empty batch is not the end).
    var moreToImport: Bool { get }

    /// Before an attempt: the rows of `rows` still queued (a trim, a purge
    /// or another handle may have taken some), leased for the attempt.
    mutating func lease(_ rows: [StoredEvent]) throws(AppNorthError) -> [StoredEvent]

    /// Starts one POST of `rows` (gzipped if `compressed` and the client
    /// compresses; `body`: those rows encoded ahead, nil: encode them).
    /// Nil, with nothing sent, when consent was revoked since `generation`
    /// or the queue is closing.
    mutating func send(_ rows: [StoredEvent], body: BatchBody?, compressed: Bool, _ generation: UInt64) -> Sending?

    /// The work between sending and waiting for the answer: removes the
    /// batch delivered before, imports the journal's next part and reads
    /// and encodes the batch after `seq` (what `readBatch` gives next).
    mutating func prefetch(after seq: Int64?, _ size: Int, _ generation: UInt64)

    /// Waits for the answer. Nil when consent was revoked meanwhile or the
    /// thread is stopping: the batch is then left alone.
    mutating func receive(_ sending: Sending) -> UploadAnswer?

    /// Removes rows (`Settlement`); returns how many rows went.
    @discardableResult
    mutating func settle(_ settlement: Settlement) -> Int

    /// Sleeps a retry delay or a Retry-After on the handle's clock. Other
    /// wake-ups (`track`, `flush`) do not cut it short; a stop and a
    /// revocation of consent since `generation` do (false).
    mutating func sleep(milliseconds: Int, _ generation: UInt64) -> Bool
}

/// What one POST came back with.
struct UploadAnswer {
    var status: Int?
    var response: HTTPResponse?
    var error: AppNorthError?
    /// The body went gzipped.
    var gzipped: Bool
}

/// What leaves the queue after an attempt.
enum Settlement: Equatable {
    /// Rows the server accepted. `deferrable`: the whole batch, whose rows
    /// may be deleted while the next batch is in flight (a crash before
    /// that resends them; the server deduplicates by event id).
    case delivered([StoredEvent], deferrable: Bool)
    /// Rows the server refused (`byID`: the ones a 400/422 listed).
    case refused([StoredEvent], byID: Bool)
    /// The cycle is over: every delivered row is deleted, the lease released.
    case cycleEnded
}
