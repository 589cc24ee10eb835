import AppNorthCore
import CAppNorthAPI
import CSystem
import Glibc

// Version, status names and string ownership.

private let versionString: StaticString = "0.4.0"

@c @implementation
public func appnorth_version() -> UnsafePointer<CChar>? {
    UnsafeRawPointer(versionString.utf8Start).assumingMemoryBound(to: CChar.self)
}

@c @implementation
public func appnorth_version_number() -> Int32 {
    Int32(AppNorthVersion.number)
}

/// Static names: appnorth_status_str never allocates.
private func statusName(_ code: Int32) -> StaticString {
    switch Int(code) {
    case APPNORTH_OK: return "ok"
    case APPNORTH_E_INVALID_ARGUMENT: return "invalid argument"
    case APPNORTH_E_INVALID_JSON: return "invalid JSON"
    case APPNORTH_E_INVALID_UTF8: return "invalid UTF-8"
    case APPNORTH_E_TOO_LARGE: return "too large"
    case APPNORTH_E_NETWORK: return "network error"
    case APPNORTH_E_VALIDATION: return "validation error"
    case APPNORTH_E_AUTHENTICATION: return "authentication error"
    case APPNORTH_E_NOT_FOUND: return "not found"
    case APPNORTH_E_CONFLICT: return "conflict"
    case APPNORTH_E_SERVER: return "server error"
    case APPNORTH_E_HTTP: return "HTTP error"
    case APPNORTH_E_STORAGE: return "storage error"
    case APPNORTH_E_QUEUE_FULL: return "queue full"
    case APPNORTH_E_WRONG_STATE: return "wrong state"
    case APPNORTH_E_INTERNAL: return "internal error"
    case APPNORTH_E_TIMEOUT: return "timeout"
    case APPNORTH_E_CANCELLED: return "cancelled"
    default: return "unknown status"
    }
}

@c @implementation
public func appnorth_status_str(_ code: Int32) -> UnsafePointer<CChar>? {
    UnsafeRawPointer(statusName(code).utf8Start).assumingMemoryBound(to: CChar.self)
}

@c @implementation
public func appnorth_string_free(_ str: UnsafeMutablePointer<CChar>?) {
    free(str)
}

/// Keeps libappnorth.so mapped until the process exits, whatever the host's
/// dlclose() calls: library threads (the events uploader, the config
/// stream) may be running its code at any moment, and an unmapped library
/// under them is a SIGSEGV (Ruby's and LuaJIT's teardown dlclose on their
/// own). The release build is linked with `-z nodelete` (Makefile); this
/// also pins any other build (the dev library under .build) when the first
/// handle is made: dlopen(RTLD_NOLOAD | RTLD_NODELETE) of the library's own
/// file marks the loaded copy as never to be unloaded.
enum LibraryPin {
    // process-wide, not a ForkLocal: the pin is the mapping's, which a child inherits.
    static let pinned: Bool = appnorth_pin_library(#dsohandle) == 1
}
