/// `track` with a before_send hook (`BeforeSendFilter`): the event is
/// assembled outside every lock, shown to the hook on the calling thread,
/// and only what it keeps or gives back is appended. Out of line, so that
/// `track` without a hook runs the code it ran before.
extension EventTracker {
    @inline(never)
    func trackFiltered(_ name: UnsafeBufferPointer<UInt8>, _ properties: UnsafeBufferPointer<UInt8>?,
                       _ filter: BeforeSendFilter) throws(AppNorthError) -> Bool {
        // Consent first: the hook never sees an event consent drops. The
        // append checks it again under the stripe's lock, as for any event.
        consent.refresh()
        if lifecycle.isClosed { throw .wrongState("the event queue is closed") }
        guard consent.trackingAllowed.load(ordering: .acquiring) else {
            counters.drop(1, .consent)
            return false
        }
        let timestampMs = clock.wallMilliseconds()
        if rotatesSessions { sender.rotateIfDue(nowMs: timestampMs) }
        var event = EventPayload.build(name: String(decoding: name, as: UTF8.self), timestampMs: timestampMs,
                                       propertiesJSON: properties.map { String(decoding: $0, as: UTF8.self) },
                                       tail: sender.tail.bytes)
        guard event.count <= maxEventBytes else {
            throw .tooLarge("event is \(event.count) bytes; the limit is \(maxEventBytes)")
        }
        let size = event.count
        event.append(0)  // the hook gets a C string
        let kept = event.withUnsafeBufferPointer { all -> [UInt8]? in
            // `{"id":"` then the id's 36 characters.
            let id = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(all)[7..<(7 + EventStamp.idLength)])
            return filter.filter(UnsafeBufferPointer(rebasing: all[0..<size]), id: id)
        }
        guard let kept else { return false }
        return try append(AssembledEvent(bytes: kept), timestampMs: timestampMs)
    }
}

/// An event the before_send hook saw, appended as its bytes.
struct AssembledEvent: JournalEvent {
    let bytes: [UInt8]

    func write(into s: inout JournalStripe.State, timestampMs: Int64) throws(AppNorthError) -> Int {
        guard let out = s.buffer.room(for: bytes.count) else {
            throw .internal("out of memory for an event of \(bytes.count) bytes")
        }
        bytes.withUnsafeBufferPointer { out.update(from: $0.baseAddress!, count: $0.count) }
        s.buffer.count = bytes.count
        return bytes.count
    }
}
