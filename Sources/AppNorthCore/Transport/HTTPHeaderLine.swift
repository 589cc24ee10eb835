/// One line of a response's header block, as curl hands it to a stream's
/// header callback (the line's bytes with their CRLF; a whole answer's
/// fields come from curl once done, `HTTPResponse.readFields`), read on
/// its raw bytes: no
/// String is made but a field's name and value, and no Character (grapheme)
/// work is done. Everything in it is the server's: any bytes give a value,
/// never a trap.
///
/// - `HTTP/...` starts a response (again after 1xx or a redirect): its
///   status is the three digits after the first space, or nil.
/// - `name: value`: the name as sent (names are compared ignoring ASCII
///   case, `HTTPResponse.header`), the value without the spaces, tabs, CRs
///   and LFs around it. A CR inside a value stays there (EntityTag and
///   RetryAfter refuse it). Bytes that are not UTF-8 are repaired (U+FFFD).
/// - A line that starts with a space or a tab continues the field before it
///   (obs-fold, RFC 9112 §5.2): joined to its value with one space.
/// - Anything else (the blank line, a line without a colon or with an
///   empty name, a line longer than `maxLineBytes`) is ignored.
package enum HTTPHeaderLine: Equatable, Sendable {
    case status(Int?)
    case field(name: String, value: String)
    case continuation(String)
    case ignored

    /// Longer lines are ignored; a folded value stops growing past it.
    package static let maxLineBytes = 16 << 10
    /// Fields past this many in one response are ignored.
    package static let maxFields = 128

    package static func parse(_ line: UnsafeRawBufferPointer) -> HTTPHeaderLine {
        let bytes = line.assumingMemoryBound(to: UInt8.self)
        let count = bytes.count
        guard count > 0, count <= maxLineBytes else { return .ignored }
        if isStatusLine(bytes) { return .status(statusCode(bytes)) }
        let end = trimmedEnd(bytes, from: 0)
        if bytes[0] == space || bytes[0] == tab {
            let start = trimmedStart(bytes, from: 0, to: end)
            return start < end ? .continuation(text(bytes, start, end)) : .ignored
        }
        var colon = 0
        while colon < count && bytes[colon] != UInt8(ascii: ":") { colon += 1 }
        guard colon < count, colon > 0 else { return .ignored }
        let start = trimmedStart(bytes, from: colon + 1, to: end)
        return .field(name: text(bytes, 0, colon), value: text(bytes, start, max(start, end)))
    }

    /// Applies one line to the fields of the response being received and
    /// its status (a status line starts over).
    package static func record(_ line: UnsafeRawBufferPointer,
                               into headers: inout [(name: String, value: String)], status: inout Int) {
        switch parse(line) {
        case .status(let code):
            headers.removeAll(keepingCapacity: true)
            if let code { status = code }
        case .field(let name, let value):
            if headers.count < maxFields { headers.append((name, value)) }
        case .continuation(let more):
            guard let last = headers.indices.last,
                  headers[last].value.utf8.count + 1 + more.utf8.count <= maxLineBytes else { return }
            headers[last].value += headers[last].value.isEmpty ? more : " " + more
        case .ignored:
            return
        }
    }

    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")

    private static func isStatusLine(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        b.count >= 5 && b[0] == UInt8(ascii: "H") && b[1] == UInt8(ascii: "T") && b[2] == UInt8(ascii: "T")
            && b[3] == UInt8(ascii: "P") && b[4] == UInt8(ascii: "/")
    }

    /// "HTTP/1.1 200 OK": the three digits after the first run of spaces,
    /// followed by a space, CR, LF or the end; else nil.
    private static func statusCode(_ b: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 5
        while i < b.count && b[i] != space { i += 1 }
        while i < b.count && b[i] == space { i += 1 }
        guard i + 3 <= b.count else { return nil }
        var code = 0
        for j in i..<(i + 3) {
            let digit = b[j] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            code = code * 10 + Int(digit)
        }
        if i + 3 < b.count {
            let after = b[i + 3]
            guard after == space || after == UInt8(ascii: "\r") || after == UInt8(ascii: "\n") else { return nil }
        }
        return code
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == space || byte == tab || byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n")
    }

    private static func trimmedStart(_ b: UnsafeBufferPointer<UInt8>, from: Int, to end: Int) -> Int {
        var i = from
        while i < end && isBlank(b[i]) { i += 1 }
        return i
    }

    private static func trimmedEnd(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var end = b.count
        while end > start && isBlank(b[end - 1]) { end -= 1 }
        return end
    }

    private static func text(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: b[start..<end]), as: UTF8.self)
    }
}
