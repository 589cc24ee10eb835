import AppNorthCore
import CAppNorthAPI

// appnorth_callbacks_hold / _resume: a runtime's fork hooks keep library
// threads out of host callbacks across fork() (the gate: LibraryGate).

@c @implementation
public func appnorth_callbacks_hold(_ timeoutMs: Int32, _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    guard timeoutMs >= 0 else {
        report(err, code: Int32(APPNORTH_E_INVALID_ARGUMENT), httpStatus: 0, message: "timeout_ms must be 0 or more")
        return Int32(APPNORTH_E_INVALID_ARGUMENT)
    }
    guard let held = LibraryGate.hold(until: Deadline.fromNow(milliseconds: Int(timeoutMs))) else {
        report(err, code: Int32(APPNORTH_E_WRONG_STATE), httpStatus: 0,
               message: "\(LibraryGate.maxHolds) holds are in place without a resume; nothing more is held")
        return Int32(APPNORTH_E_WRONG_STATE)
    }
    guard held else {
        report(err, code: Int32(APPNORTH_E_TIMEOUT), httpStatus: 0,
               message: "a host callback was still running on another thread after timeout_ms; none starts until appnorth_callbacks_resume")
        return Int32(APPNORTH_E_TIMEOUT)
    }
    reportSuccess(err)
    return 0
}

@c @implementation
public func appnorth_callbacks_resume() {
    LibraryGate.resume()
}
