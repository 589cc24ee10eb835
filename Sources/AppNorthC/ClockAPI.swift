import AppNorthCore
import CAppNorthAPI

// appnorth_clock_*: a manual clock for tests and host-driven time.

@c @implementation
public func appnorth_clock_new_manual(_ wallMs: Int64, _ outClock: UnsafeMutablePointer<OpaquePointer?>?,
                                      _ err: ErrorOut?) -> Int32 {
    outClock?.pointee = nil
    return guarded(err) {
        let out = try required(outClock, "out_clock")
        out.pointee = Handle.make(ManualClock(wallMilliseconds: wallMs))
    }
}

@c @implementation
public func appnorth_clock_free(_ clock: OpaquePointer?) {
    Handle.release(clock, as: ManualClock.self)
}

@c @implementation
public func appnorth_clock_advance(_ clock: OpaquePointer?, _ ms: Int64, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        let clock = try Handle.get(clock, as: ManualClock.self, "clock")
        guard ms >= 0 else { throw AppNorthError.invalidArgument("a clock only moves forward: ms must be 0 or more") }
        clock.advance(milliseconds: ms)
    }
}

@c @implementation
public func appnorth_clock_set_wall(_ clock: OpaquePointer?, _ wallMs: Int64, _ err: ErrorOut?) -> Int32 {
    guarded(err) {
        try Handle.get(clock, as: ManualClock.self, "clock").setWall(milliseconds: wallMs)
    }
}

/// The clock a handle was given, or the system clock for NULL.
func clockArgument(_ clock: OpaquePointer?) throws -> any AppNorthClock {
    guard clock != nil else { return SystemClock() }
    return try Handle.get(clock, as: ManualClock.self, "clock")
}
