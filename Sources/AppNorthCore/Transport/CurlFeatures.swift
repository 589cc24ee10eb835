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
    // process-wide, not a ForkLocal: libcurl's global init, done once per process image; a
    // child inherits it done.
    package static let initialised: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

    /// curl_easy_init with no fork() in the middle of it. Since 7.84 it
    /// takes libcurl's global init lock, a spin lock: a fork while another
    /// thread holds it leaves the child spinning for ever in its own first
    /// curl_easy_init (test_fork_async: 2 children in about 6,000 hung
    /// there, each with one thread, in curl_easy_init). Every easy handle
    /// of the library is made here, under a `Lock`, which ForkGuard holds
    /// across fork(); so no thread of the parent is inside libcurl's lock
    /// when the child is made.
    package static func makeEasy() -> UnsafeMutableRawPointer? {
        _ = initialised
        return easyInit.value.turn.withLock { _ in curl_easy_init() }
    }

    private final class EasyInit: Sendable {
        let turn = Lock<Void>((), level: LockClass.curlEasyInit)
    }

    private static let easyInit = ForkLocal<EasyInit, Never>(level: LockClass.curlEasyInit) { EasyInit() }

    /// The loaded libcurl's version, "7.74.0" for instance.
    package static var version: String {
        _ = initialised
        guard let text = cshim_version_text() else { return "unknown" }
        return String(cString: text)
    }

    /// Whether CURLOPT_CAINFO_BLOB is taken (libcurl 7.77 and later, with a
    /// TLS backend that reads blobs). Without it an in-memory CA bundle is
    /// refused when it is set, with a message that says to pass a file.
    // process-wide, not a ForkLocal: what the loaded libcurl can do, the same in a child.
    package static let takesCABlob: Bool = {
        guard let h = makeEasy() else { return false }
        defer { curl_easy_cleanup(h) }
        let empty: [UInt8] = [0]
        return empty.withUnsafeBytes { cshim_setopt_blob_copy(h, CURLOPT_CAINFO_BLOB, $0.baseAddress, 0) } == CURLE_OK
    }()

    /// Whether a transfer's fields can be read after it ends
    /// (curl_easy_header: 7.83 and later, unless built without it). Without
    /// it every transfer reads its fields in the header callback.
    // process-wide, not a ForkLocal: what the loaded libcurl can do, the same in a child.
    package static let keepsFields: Bool = {
        guard let h = makeEasy() else { return false }
        defer { curl_easy_cleanup(h) }
        var header: UnsafeMutablePointer<curl_header>? = nil
        return cshim_easy_header(h, "ETag", 0, UInt32(CURLH_HEADER), -1, &header) != CURLHE_NOT_BUILT_IN
    }()
}

extension LockClass {
    /// `CurlFeatures.easyInit`: one curl_easy_init at a time, none across fork() (and its
    /// `ForkLocal` slot: never nested).
    static let curlEasyInit = LockClass.leaf("CurlFeatures.easyInit")
}
