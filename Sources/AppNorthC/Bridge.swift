import AppNorthCore
import CAppNorthAPI
import Glibc

// The C-ABI layer's shared plumbing: status mapping, the error
// out-parameter and string conversion (handles: Handle.swift). The
// exported functions live one file per component and only convert and
// delegate.

extension AppNorthError {
    /// The APPNORTH_E_* status for this error.
    var status: Int32 {
        switch self {
        case .invalidArgument: return Int32(APPNORTH_E_INVALID_ARGUMENT)
        case .invalidJSON: return Int32(APPNORTH_E_INVALID_JSON)
        case .invalidUTF8: return Int32(APPNORTH_E_INVALID_UTF8)
        case .tooLarge: return Int32(APPNORTH_E_TOO_LARGE)
        case .network: return Int32(APPNORTH_E_NETWORK)
        case .validation: return Int32(APPNORTH_E_VALIDATION)
        case .authentication: return Int32(APPNORTH_E_AUTHENTICATION)
        case .notFound: return Int32(APPNORTH_E_NOT_FOUND)
        case .conflict: return Int32(APPNORTH_E_CONFLICT)
        case .server: return Int32(APPNORTH_E_SERVER)
        case .http: return Int32(APPNORTH_E_HTTP)
        case .queueFull: return Int32(APPNORTH_E_QUEUE_FULL)
        case .storage: return Int32(APPNORTH_E_STORAGE)
        case .wrongState: return Int32(APPNORTH_E_WRONG_STATE)
        case .timeout: return Int32(APPNORTH_E_TIMEOUT)
        case .cancelled: return Int32(APPNORTH_E_CANCELLED)
        case .internal: return Int32(APPNORTH_E_INTERNAL)
        }
    }
}

/// Fills the optional error out-parameter. The message is truncated on a
/// UTF-8 boundary so the host never sees half a character.
func report(_ err: UnsafeMutablePointer<appnorth_error>?, code: Int32, httpStatus: Int, message: String) {
    guard let err else { return }
    err.pointee.code = code
    err.pointee.http_status = Int32(clamping: httpStatus)
    withUnsafeMutableBytes(of: &err.pointee.message) { buffer in
        var bytes = Array(message.utf8.prefix(buffer.count - 1))
        while let last = bytes.last, last & 0xC0 == 0x80 || (last & 0xC0 == 0xC0) {
            // Drop a trailing partial sequence (continuation bytes or a lead byte).
            if last & 0xC0 == 0xC0 { bytes.removeLast(); break }
            let start = bytes.lastIndex { $0 & 0xC0 != 0x80 } ?? 0
            let lead = bytes[start]
            let needed = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
            if bytes.count - start < needed { bytes.removeSubrange(start...) }
            break
        }
        buffer.copyBytes(from: bytes)
        buffer[bytes.count] = 0
    }
}

/// `report` of success (status 0, an empty message) without the
/// truncation's work: every call that succeeds pays it.
@inline(__always)
func reportSuccess(_ err: UnsafeMutablePointer<appnorth_error>?) {
    guard let err else { return }
    err.pointee.code = 0
    err.pointee.http_status = 0
    withUnsafeMutableBytes(of: &err.pointee.message) { $0[0] = 0 }
}

/// Runs the body of an exported function: catches every error, maps it to
/// a status, and writes the error out-parameter either way. The handles the
/// body gets count the call as in flight on them until it returns.
func guarded(_ err: UnsafeMutablePointer<appnorth_error>?, _ body: () throws -> Void) -> Int32 {
    do {
        // After appnorth_shutdown() every call is refused.
        if LibraryGate.isClosed { throw LibraryGate.refusal }
        try ThreadCalls.scope(body)
        reportSuccess(err)
        return 0
    } catch {
        let (code, httpStatus, message) = statusReport(error)
        report(err, code: code, httpStatus: httpStatus, message: message)
        return code
    }
}

/// The status, HTTP status and message the host gets for an error.
func statusReport(_ error: any Error) -> (code: Int32, httpStatus: Int, message: String) {
    switch error {
    case let error as AppNorthError:
        return (error.status, error.httpStatus, error.message)
    default:
        return (Int32(APPNORTH_E_INTERNAL), 0, "unexpected error: \(error)")
    }
}

/// Writes an optional int32 out-parameter.
func setOut(_ out: UnsafeMutablePointer<Int32>?, _ value: Int) {
    out?.pointee = Int32(clamping: value)
}

/// A required pointer argument.
func required<T>(_ pointer: T?, _ name: String) throws(AppNorthError) -> T {
    guard let pointer else { throw .invalidArgument("\(name) is NULL") }
    return pointer
}

/// A 0/1 flag argument: any other value is a host bug, not a yes.
func flag(_ value: Int32, _ name: String) throws(AppNorthError) -> Bool {
    guard value == 0 || value == 1 else { throw .invalidArgument("\(name) must be 0 or 1, not \(value)") }
    return value == 1
}

/// A jitter share given in percent (0 to 100), as the core's fraction.
func jitterFraction(_ percent: Int32) throws(AppNorthError) -> Double {
    guard Limits.jitterPercent.contains(percent) else {
        throw .invalidArgument("percent must be \(Limits.jitterPercent.lowerBound) to \(Limits.jitterPercent.upperBound), not \(percent)")
    }
    return Double(percent) / Double(Limits.jitterPercent.upperBound)
}

/// A required UTF-8 string argument.
func requiredString(_ pointer: UnsafePointer<CChar>?, _ name: String,
                    maxBytes: Int? = nil) throws(AppNorthError) -> String {
    try Text.decodeC(required(pointer, name), what: name, maxBytes: maxBytes)
}

/// An optional UTF-8 string argument (NULL gives nil).
func optionalString(_ pointer: UnsafePointer<CChar>?, _ name: String,
                    maxBytes: Int? = nil) throws(AppNorthError) -> String? {
    guard let pointer else { return nil }
    return try Text.decodeC(pointer, what: name, maxBytes: maxBytes)
}

/// Copies a string into malloc'd memory the host frees with
/// appnorth_string_free(). A string holding U+0000 (a JSON string value
/// spelled with `\u0000`) is refused: as a C string it would be cut short.
func hostString(_ value: String) throws(AppNorthError) -> UnsafeMutablePointer<CChar> {
    guard !holdsNUL(value) else {
        throw .invalidArgument("the value holds U+0000 and cannot be returned as a C string")
    }
    guard let copy = value.withCString({ strdup($0) }) else { throw .internal("out of memory") }
    return copy
}

/// Whether `value` holds U+0000 (it would be cut short as a C string). On
/// the contiguous bytes when there are (memchr), not byte by byte.
func holdsNUL(_ value: String) -> Bool {
    value.utf8.withContiguousStorageIfAvailable { bytes in
        bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false
    } ?? value.utf8.contains(0)
}

/// Writes a string out-parameter: NULL first, so a failure leaves NULL.
func returnString(_ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ name: String,
                  _ produce: () throws -> String) throws {
    let out = try required(out, name)
    out.pointee = nil
    out.pointee = try hostString(produce())
}

/// Writes a string out-parameter that the caller may leave NULL.
func returnOptionalString(_ out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ value: String?) throws {
    guard let out else { return }
    out.pointee = nil
    if let value { out.pointee = try hostString(value) }
}

/// A host pointer carried into Swift closures. The host promises it stays
/// valid for as long as the closure is registered.
struct HostPointer: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer?
}
