import CCurl

/// An owned curl multi handle and its connection cache. Only one transfer
/// uses it at a time.
final class TransferSlot: @unchecked Sendable {
    let multi: UnsafeMutableRawPointer
    init(_ multi: UnsafeMutableRawPointer) { self.multi = multi }
    func close() { curl_multi_cleanup(multi) }

    /// Runs a transfer on the slot's multi handle, whose connection cache
    /// outlives the easy handle. A cancellable transfer is woken at once by
    /// a cancel of its `Cancellation` or its stop token (curl's easy loop only checks the
    /// progress callback about once a second while a stream is idle), and
    /// its idle time is measured exactly (curl's low-speed check averages
    /// over several seconds, so a burst at connect would hide a silent
    /// stream).
    func run(_ transfer: EasyTransfer) -> CURLcode {
        let h = transfer.handle
        let context = transfer.context
        let idleTimeoutMs = transfer.idleTimeoutMs
        let stop = context.stop
        let waker = TransferWaker(multi: multi)
        // Attached first, so a cancel from now on wakes this transfer, and
        // one since it began is seen by the check below.
        context.cancellation.attach(waker, key: ObjectIdentifier(self))
        defer { context.cancellation.detach(ObjectIdentifier(self)) }
        // Cancelled before it started: send nothing (the first multi_perform
        // below may already write the request).
        if context.isCancelled { return CURLE_ABORTED_BY_CALLBACK }
        guard curl_multi_add_handle(multi, h) == CURLM_OK else { return CURLE_FAILED_INIT }
        stop?.attach(waker, key: ObjectIdentifier(transfer))
        defer {
            stop?.detach(ObjectIdentifier(transfer))
            curl_multi_remove_handle(multi, h)
        }
        return pump(h, context, idleTimeoutMs: idleTimeoutMs)
    }

    /// Drives the transfer added to `multi` until it ends, is cancelled or
    /// idles out.
    private func pump(_ h: UnsafeMutableRawPointer, _ context: TransferContext, idleTimeoutMs: Int) -> CURLcode {
        context.lastActivityNs = monotonicNow()
        var running: Int32 = 0
        var mcode = curl_multi_perform(multi, &running)
        while mcode == CURLM_OK && running > 0 && !context.isCancelled {
            var waitMs: Int32 = 1000
            if idleTimeoutMs > 0 {
                let now = monotonicNow()
                let idle = Deadline(milliseconds: idleTimeoutMs, after: context.lastActivityNs)
                if idle.hasPassed(at: now) {
                    context.end(.idle)
                    return CURLE_OPERATION_TIMEDOUT
                }
                // A stream sleeps until data, its idle deadline, or a wake-up
                // (a cancel or stop calls curl_multi_wakeup): an idle stream
                // wakes once per server keepalive, not once a second.
                waitMs = Int32(clamping: idle.sleepMilliseconds(at: now))
            }
            mcode = curl_multi_poll(multi, nil, 0, waitMs, nil)
            if mcode != CURLM_OK || context.isCancelled { break }
            mcode = curl_multi_perform(multi, &running)
        }
        if context.isCancelled { return CURLE_ABORTED_BY_CALLBACK }
        guard mcode == CURLM_OK else { return CURLE_RECV_ERROR }
        var result = CURLE_RECV_ERROR
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            if message.pointee.msg == CURLMSG_DONE { result = message.pointee.data.result }
        }
        return result
    }
}
