/// One Server-Sent Event, as dispatched by a blank line.
package struct ServerSentEvent: Sendable, Equatable {
    /// The `event:` field, "message" when absent.
    package var type: String
    /// The `data:` lines joined with "\n", as bytes (validated by whoever
    /// parses them: a config payload goes through jansson).
    package var data: [UInt8]
    /// The last `id:` seen on the stream so far (it carries over to later
    /// events, as the specification says), "" when none.
    package var lastEventID: String

    package init(type: String, data: [UInt8], lastEventID: String) {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
    }

    package var text: String { String(decoding: data, as: UTF8.self) }
}

/// An incremental parser for a `text/event-stream` body (the WHATWG HTML
/// "event stream interpretation"): feed it chunks as they arrive, split
/// anywhere, even inside a line ending or a UTF-8 sequence; it returns the
/// events that became complete.
///
/// Lines end with LF, CRLF or CR. `:` lines are comments (keepalives).
/// Fields are `event`, `data`, `id` (ignored when it holds a NUL) and
/// `retry` (digits only); others are ignored. A leading byte order mark is
/// skipped. An event whose fields grow past `maxEventBytes` is dropped whole.
/// A pure value type: no I/O.
package struct ServerSentEventParser: Sendable {
    package let maxEventBytes: Int
    /// The `id:` carried by the stream so far.
    package private(set) var lastEventID = ""
    /// The server's `retry:` advice in milliseconds, if it sent one.
    package private(set) var retryMilliseconds: Int?
    /// Lines seen so far, comments included: proof that the stream is live.
    package private(set) var linesReceived = 0
    /// Events that passed `maxEventBytes`, counted the moment the limit is
    /// passed (a line that never ends counts at once, not when it ends).
    package private(set) var oversizeEvents = 0

    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var eventType = ""
    private var afterCR = false
    private var atStart = true
    private var bomCheck: [UInt8] = []
    private var oversize = false

    package init(maxEventBytes: Int = 16 << 20) {
        self.maxEventBytes = maxEventBytes
    }

    /// Consumes a chunk; returns the events it completed, in order.
    package mutating func feed<S: Sequence>(_ chunk: S) -> [ServerSentEvent] where S.Element == UInt8 {
        var events: [ServerSentEvent] = []
        for byte in chunk {
            if atStart {
                // Skip one UTF-8 byte order mark (EF BB BF) at the very start.
                bomCheck.append(byte)
                let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
                if bomCheck == Array(bom.prefix(bomCheck.count)) {
                    if bomCheck.count == 3 { atStart = false; bomCheck = [] }
                    continue
                }
                atStart = false
                let pending = bomCheck
                bomCheck = []
                for b in pending { consume(b, into: &events) }
                continue
            }
            consume(byte, into: &events)
        }
        return events
    }

    private mutating func consume(_ byte: UInt8, into events: inout [ServerSentEvent]) {
        switch byte {
        case 0x0A:  // LF
            if afterCR { afterCR = false; return }  // the LF of a CRLF
            endLine(into: &events)
        case 0x0D:  // CR
            afterCR = true
            endLine(into: &events)
        default:
            afterCR = false
            if line.count + data.count < maxEventBytes {
                line.append(byte)
            } else {
                markOversize()
            }
        }
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) {
        linesReceived &+= 1
        let current = line
        line.removeAll(keepingCapacity: true)
        if current.isEmpty {
            dispatch(into: &events)
            return
        }
        if current[0] == UInt8(ascii: ":") { return }  // a comment
        let field: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = current.firstIndex(of: UInt8(ascii: ":")) {
            field = current[..<colon]
            value = current[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            field = current[...]
            value = []
        }
        switch String(decoding: field, as: UTF8.self) {
        case "event":
            eventType = String(decoding: value, as: UTF8.self)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
            if data.count > maxEventBytes { markOversize(); data.removeAll() }
        case "id":
            if !value.contains(0) { lastEventID = String(decoding: value, as: UTF8.self) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
               let ms = Int(String(decoding: value, as: UTF8.self)) {
                retryMilliseconds = ms
            }
        default:
            break
        }
    }

    private mutating func markOversize() {
        if !oversize { oversizeEvents &+= 1 }
        oversize = true
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            data.removeAll(keepingCapacity: false)
            hasData = false
            eventType = ""
            oversize = false
        }
        guard hasData, !oversize else { return }
        events.append(ServerSentEvent(type: eventType.isEmpty ? "message" : eventType, data: data,
                                      lastEventID: lastEventID))
    }
}
