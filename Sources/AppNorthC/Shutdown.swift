import AppNorthCore
import CAppNorthAPI
import Glibc
import Synchronization

@c @implementation
public func appnorth_shutdown(_ timeoutMs: Int32, _ err: UnsafeMutablePointer<appnorth_error>?) -> Int32 {
    if ThreadCalls.inCallback {
        report(err, code: Int32(APPNORTH_E_WRONG_STATE), httpStatus: 0,
               message: "appnorth_shutdown cannot be called from inside a library callback")
        return Int32(APPNORTH_E_WRONG_STATE)
    }
    guard timeoutMs >= 0 else {
        report(err, code: Int32(APPNORTH_E_INVALID_ARGUMENT), httpStatus: 0, message: "timeout_ms must be 0 or more")
        return Int32(APPNORTH_E_INVALID_ARGUMENT)
    }
    let deadline = Deadline.fromNow(milliseconds: Int(timeoutMs))
    // 1. No host callback starts from now on; calls are refused.
    _ = LibraryGate.close()
    // 2. Everything is asked to end, and nothing is waited for yet: the
    //    handles' transfers and operations are cancelled, and every library
    //    thread (uploaders, config streams, the transfer thread, workers)
    //    is told to stop. A wait here, per handle, would not keep timeout_ms.
    ThreadOwners.requestStopAll()
    LibraryThreads.requestStopAll()
    // 3. Callbacks in flight on any thread (a logger on an uploader, a
    //    listener on a stream thread, a completion on the transfer thread,
    //    a dispatch on a host thread) return.
    guard LibraryGate.waitIdle(until: deadline) else {
        report(err, code: Int32(APPNORTH_E_TIMEOUT), httpStatus: 0,
               message: "a host callback was still running after timeout_ms; none starts any more")
        return Int32(APPNORTH_E_TIMEOUT)
    }
    // 4. Every library thread ends: the registry waits for them, in the
    //    time left, and joins those that can be.
    guard LibraryThreads.stopAll(milliseconds: deadline.remainingMilliseconds(at: SystemClock().monotonicNanoseconds())) else {
        let left = LibraryThreads.running.joined(separator: ", ")
        report(err, code: Int32(APPNORTH_E_TIMEOUT), httpStatus: 0,
               message: "library threads still running after timeout_ms: \(left); none calls the host any more")
        return Int32(APPNORTH_E_TIMEOUT)
    }
    reportSuccess(err)
    return 0
}
