import CCurl

/// Which servers the transport trusts and which proxy it goes through.
/// The defaults are curl's: the system CA store, no pins, and the standard
/// proxy environment variables (http_proxy, https_proxy, all_proxy,
/// no_proxy) honoured. A private CA (`caFile`, `caPEM`) replaces every
/// default trust source: the bundle file and the CA directory libcurl was
/// built with. TLS 1.2 is the floor whatever OpenSSL's configuration
/// allows (docs/tls-and-proxies.md).
public struct HTTPTrust: Sendable, Equatable {
    /// A PEM CA bundle file to verify servers with instead of the system store.
    public var caFile: String?
    /// A PEM CA bundle held in memory; used instead of `caFile` when both are set.
    public var caPEM: [UInt8]?
    /// curl's pinned-key string: one or more "sha256//<base64>" joined by ";".
    public var pinnedPublicKeys: String?
    /// An explicit proxy URL, for instance "http://proxy.example:3128".
    public var proxyURL: String?
    /// When true, curl's proxy environment variables are not read.
    public var ignoreProxyEnvironment: Bool

    public init(caFile: String? = nil, caPEM: [UInt8]? = nil, pinnedPublicKeys: String? = nil,
                proxyURL: String? = nil, ignoreProxyEnvironment: Bool = false) {
        self.caFile = caFile
        self.caPEM = caPEM
        self.pinnedPublicKeys = pinnedPublicKeys
        self.proxyURL = proxyURL
        self.ignoreProxyEnvironment = ignoreProxyEnvironment
    }

    // MARK: Validation, shared with the C options setters

    /// The largest in-memory CA bundle accepted (the Mozilla bundle is ~220 KB).
    public static let maxCABytes = 4 << 20
    /// The longest CA path or proxy URL accepted.
    public static let maxTextBytes = 4096
    /// At most this many pins.
    public static let maxPins = 64

    public static func validatedCAFile(_ path: String) throws(AppNorthError) -> String {
        guard !path.isEmpty, path.utf8.count <= maxTextBytes else {
            throw .invalidArgument("CA file path must be 1 to \(maxTextBytes) bytes")
        }
        return path
    }

    public static func validatedCAPEM(_ pem: [UInt8]) throws(AppNorthError) -> [UInt8] {
        guard pem.count <= maxCABytes else {
            throw .tooLarge("CA bundle is \(pem.count) bytes; the limit is \(maxCABytes)")
        }
        guard CurlFeatures.takesCABlob else {
            throw .invalidArgument("an in-memory CA bundle needs libcurl 7.77 or later; this process has libcurl "
                                   + "\(CurlFeatures.version): pass the bundle as a file instead (ca_file)")
        }
        // Catch a DER file or a wrong buffer early, with a clear message,
        // instead of an opaque TLS failure on the first request.
        let marker = Array("-----BEGIN CERTIFICATE-----".utf8)
        guard pem.count >= marker.count,
              (0...(pem.count - marker.count)).contains(where: { pem[$0..<($0 + marker.count)].elementsEqual(marker) })
        else {
            throw .invalidArgument("CA bundle must be PEM text with at least one BEGIN CERTIFICATE block")
        }
        return pem
    }

    /// Accepts "sha256//<44 base64 chars>" pins joined by ";" (spaces
    /// around them are dropped) and returns them in curl's form.
    public static func validatedPins(_ text: String) throws(AppNorthError) -> String {
        var pins: [String] = []
        for raw in text.split(separator: ";", omittingEmptySubsequences: false) {
            let pin = String(Text.trimmed(String(raw)))
            guard pin.hasPrefix("sha256//") else {
                throw .invalidArgument("each pin must be \"sha256//<base64 of the key's SHA-256>\"")
            }
            let digest = pin.utf8.dropFirst(8)
            let isBase64 = digest.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
            }
            // A SHA-256 digest is 32 bytes: 44 base64 characters with padding.
            guard digest.count == 44, isBase64 else {
                throw .invalidArgument("pin \"\(pin.prefix(80))\" is not a base64 SHA-256 digest (44 characters)")
            }
            pins.append(pin)
        }
        guard pins.count <= maxPins else { throw .invalidArgument("at most \(maxPins) pins") }
        return pins.joined(separator: ";")
    }

    public static func validatedProxyURL(_ url: String) throws(AppNorthError) -> String {
        guard !url.isEmpty, url.utf8.count <= maxTextBytes else {
            throw .invalidArgument("proxy URL must be 1 to \(maxTextBytes) bytes")
        }
        for byte in url.utf8 where byte <= 0x20 || byte >= 0x7F {
            _ = byte
            throw .invalidArgument("proxy URL must be plain ASCII without spaces")
        }
        return url
    }
}

// MARK: Applying to a transfer

extension HTTPTrust {
    /// Sets CA, TLS floor, pins and proxy on a fresh easy handle; curl
    /// copies the strings and the blob.
    func apply(to h: UnsafeMutableRawPointer) {
        // The library's own floor: OPENSSL_CONF may allow TLS 1.0 and 1.1.
        cshim_setopt_long(h, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        cshim_setopt_long(h, CURLOPT_PROXY_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        if caPEM != nil || caFile != nil {
            // A private CA is the only one: without this, Debian's libcurl
            // also trusts its built-in CA directory (/etc/ssl/certs).
            cshim_setopt_pointer(h, CURLOPT_CAPATH, nil)
            cshim_setopt_pointer(h, CURLOPT_CAINFO, nil)
        }
        if let pem = caPEM {
            pem.withUnsafeBytes { _ = cshim_setopt_blob_copy(h, CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count) }
        } else if let file = caFile {
            cshim_setopt_pointer(h, CURLOPT_CAINFO, file)
        }
        if let pins = pinnedPublicKeys {
            cshim_setopt_pointer(h, CURLOPT_PINNEDPUBLICKEY, pins)
        }
        if let proxy = proxyURL {
            cshim_setopt_pointer(h, CURLOPT_PROXY, proxy)
        } else if ignoreProxyEnvironment {
            // An empty proxy string tells curl: no proxy, whatever the environment says.
            cshim_setopt_pointer(h, CURLOPT_PROXY, "")
        }
        if ignoreProxyEnvironment {
            // Without this, an explicit proxy would still be bypassed for hosts in no_proxy.
            cshim_setopt_pointer(h, CURLOPT_NOPROXY, "")
        }
    }
}
