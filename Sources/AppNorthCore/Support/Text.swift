import Glibc

/// Small text helpers the core needs without Foundation.
package enum Text {
    /// Decodes NUL-terminated C text, refusing invalid UTF-8 instead of
    /// repairing it (a repaired string would silently change host data).
    /// With `maxBytes`, longer text is refused after reading at most
    /// `maxBytes + 1` bytes: an oversize value costs no copy and no scan.
    package static func decodeC(_ pointer: UnsafePointer<CChar>, what: String,
                               maxBytes: Int? = nil) throws(AppNorthError) -> String {
        let length: Int
        if let maxBytes {
            length = strnlen(pointer, maxBytes + 1)
            guard length <= maxBytes else { throw .tooLarge("\(what) is longer than \(maxBytes) bytes") }
        } else {
            length = strlen(pointer)
        }
        // The text ends at `length` with its NUL. Not `String(validating:as:)`:
        // being generic, it looks its metadata up in the runtime's shared
        // cache on every call, a write to memory every thread's calls share.
        guard let text = String(validatingCString: pointer) else {
            throw .invalidUTF8("\(what) is not valid UTF-8")
        }
        return text
    }

    /// An id as one URL path segment (RFC 3986 §3.3): every byte but the
    /// unreserved ones percent-encoded, so "/", "?", "#" and "%" stay
    /// inside the segment. "." and ".." are refused before (requireID,
    /// validatedAppID): encoding cannot stop curl removing dot segments.
    package static func pathSegment(_ id: String) -> String { percentEncoded(id) }

    /// Percent-encodes a query component (RFC 3986 unreserved characters
    /// stay as they are).
    package static func percentEncoded(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + hexByte(byte)
            }
        }
        return out
    }

    /// Text from outside (a server's error message or header, curl's
    /// reason) made safe for a log line or an error message (CWE-117):
    /// bytes below 0x20, 0x7F and the C1 controls (U+0080-U+009F) become
    /// `\xNN` / `\u{NN}`, so no CR, LF or terminal escape gets through. The
    /// one owner of the rule: the Logger applies it to every line, and
    /// error messages built from server text apply it where they are made.
    /// `value` cut to its first `maxScalars` Unicode scalars, with what was
    /// left out counted ("… (+N bytes)"); `value` itself when short enough.
    package static func excerpt(_ value: String, _ maxScalars: Int) -> String {
        var scalars = value.unicodeScalars.makeIterator()
        var kept = String.UnicodeScalarView()
        for _ in 0..<max(0, maxScalars) {
            guard let scalar = scalars.next() else { return value }
            kept.append(scalar)
        }
        guard scalars.next() != nil else { return value }
        let left = value.utf8.count - String(kept).utf8.count
        return String(kept) + "… (+\(left) bytes)"
    }

    package static func escapingControls(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: isControl) else { return value }
        var out = ""
        for scalar in value.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\x" + hexByte(UInt8(scalar.value))
            } else if isControl(scalar) {
                out += "\\u{" + hexByte(UInt8(scalar.value)) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    package static func hexByte(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
    }

    /// ASCII lowercase; non-ASCII characters are kept as they are, so an
    /// email's identity never depends on locale tables.
    package static func asciiLowercased(_ value: String) -> String {
        String(decoding: value.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    package static func trimmed(_ value: String) -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = value.firstIndex(where: { !isSpace($0) }),
              let last = value.lastIndex(where: { !isSpace($0) }) else { return "" }
        return value[first...last]
    }
}
