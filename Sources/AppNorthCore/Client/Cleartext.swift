/// The rule for a credential over plain http:// (RFC 6750 §5.3): refused,
/// except to a loopback host (the dev server, a local sidecar) or to a
/// host the app names explicitly, which is logged as a warning. The one
/// owner of the rule: AppNorthClientConfiguration applies it whenever a
/// credential is configured.
package enum Cleartext {
    /// The longest host name accepted as an opt-in.
    package static let maxHostBytes = 253

    /// Throws `.invalidArgument` for a credential on http:// to a host
    /// neither loopback nor in `allowed`.
    package static func check(url: String, allowed: [String], logger: Logger) throws(AppNorthError) {
        let lower = Text.asciiLowercased(url)
        guard lower.hasPrefix("http://") else { return }
        let host = Self.host(of: lower)
        if isLoopback(host) { return }
        guard allowed.contains(where: { Text.asciiLowercased($0) == host }) else {
            throw .invalidArgument("refusing to send a credential in clear text to \(host): use https://, "
                                   + "or allow the host by name (appnorth_client_options_allow_cleartext_host)")
        }
        logger.log(.warning, "the credential goes in clear text to \(host) (allowed by name): anyone on the path can read it")
    }

    /// A host name as given to the opt-in: 1 to 253 bytes of a name or an
    /// address, no port, no scheme.
    package static func validatedHost(_ host: String) throws(AppNorthError) -> String {
        guard (1...maxHostBytes).contains(host.utf8.count) else {
            throw .invalidArgument("host must be 1 to \(maxHostBytes) bytes")
        }
        for byte in host.utf8 {
            let ok = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
            guard ok else { throw .invalidArgument("host must be a bare host name or address (no scheme, path or port)") }
        }
        let lower = Text.asciiLowercased(host)
        if lower.contains(":") || lower.contains("[") {
            // Only an IPv6 address has colons: "name:port" is refused.
            let bare = lower.hasPrefix("[") && lower.hasSuffix("]") ? lower.dropFirst().dropLast() : Substring(lower)
            let isAddress = bare.contains(":") && bare.utf8.allSatisfy { byte in
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")
            }
            guard isAddress else { throw .invalidArgument("host must be a bare host name or address (no port)") }
            return "[" + bare + "]"
        }
        return lower
    }

    /// The host of an http:// URL (lowercased): no user info, no port; an
    /// IPv6 literal keeps its brackets.
    static func host(of lowerURL: String) -> String {
        var authority = Substring(lowerURL.dropFirst(7))
        if let slash = authority.firstIndex(of: "/") { authority = authority[..<slash] }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[...close])
        }
        if let colon = authority.firstIndex(of: ":") { authority = authority[..<colon] }
        return String(authority)
    }

    /// localhost (and names under .localhost, RFC 6761), 127.0.0.0/8, ::1.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in part.count <= 3 && UInt8(part) != nil }
    }
}
