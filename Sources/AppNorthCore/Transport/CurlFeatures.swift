import CCurl

/// What this process's libcurl can do, asked at run time: the library is
/// built against the platform floor's headers (curl 7.74, Debian 11;
/// docs/platforms.md) and loads with whatever libcurl the host has. Each
/// answer is asked once, on a throwaway handle, after curl_global_init.
package enum CurlFeatures {
    /// libcurl must be initialised once per process before any other curl
    /// call. A Swift global is initialised exactly once, thread-safely. It
    /// is never cleaned up: a host that exits with live handles must not
    /// crash.
    package static let initialised: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

    /// The loaded libcurl's version, "7.74.0" for instance.
    package static var version: String {
        _ = initialised
        guard let text = cshim_version_text() else { return "unknown" }
        return String(cString: text)
    }

    /// Whether CURLOPT_CAINFO_BLOB is taken (libcurl 7.77 and later, with a
    /// TLS backend that reads blobs). Without it an in-memory CA bundle is
    /// refused when it is set, with a message that says to pass a file.
    package static let takesCABlob: Bool = {
        _ = initialised
        guard let h = curl_easy_init() else { return false }
        defer { curl_easy_cleanup(h) }
        let empty: [UInt8] = [0]
        return empty.withUnsafeBytes { cshim_setopt_blob_copy(h, CURLOPT_CAINFO_BLOB, $0.baseAddress, 0) } == CURLE_OK
    }()

    /// Whether a transfer's fields can be read after it ends
    /// (curl_easy_header: 7.83 and later, unless built without it). Without
    /// it every transfer reads its fields in the header callback.
    package static let keepsFields: Bool = {
        _ = initialised
        guard let h = curl_easy_init() else { return false }
        defer { curl_easy_cleanup(h) }
        var header: UnsafeMutablePointer<curl_header>? = nil
        return cshim_easy_header(h, "ETag", 0, UInt32(CURLH_HEADER), -1, &header) != CURLHE_NOT_BUILT_IN
    }()
}
