/// An entity tag as RFC 9110 §8.8.3 writes it, the one check for every
/// ETag the library stores or sends back in If-None-Match:
///
///     entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
///     etagc      = %x21 / %x23-7E / obs-text (%x80-FF)
///
/// and at most `maxBytes`. Anything else (a bare CR, a space, no quotes) is
/// not an entity tag: it is ignored, as if the server had sent none, and
/// costs nothing else (a cached config with one stays usable).
package enum EntityTag {
    package static let maxBytes = 256

    /// `raw` when it is a valid entity tag, else nil.
    package static func validated(_ raw: String?) -> String? {
        guard let raw else { return nil }
        var bytes = Substring(raw).utf8[...]
        guard bytes.count <= maxBytes else { return nil }
        if bytes.starts(with: "W/".utf8) { bytes = bytes.dropFirst(2) }
        guard bytes.count >= 2, bytes.first == 0x22, bytes.last == 0x22 else { return nil }
        let opaque = bytes.dropFirst().dropLast()
        return opaque.allSatisfy { $0 == 0x21 || (0x23...0x7E).contains($0) || $0 >= 0x80 } ? raw : nil
    }
}
