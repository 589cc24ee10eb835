import AppNorthCore
import CAppNorthAPI

// appnorth_events_pending: the read-back for a host's own tests (issue #40 item 5).

@c @implementation
public func appnorth_events_pending(_ events: OpaquePointer?, _ max: Int32, _ outJSON: OutString?,
                                    _ err: ErrorOut?) -> Int32 {
    outJSON?.pointee = nil
    return guarded(err) {
        try Handle.borrow(events, as: AppNorthEvents.self, "events") { events in
            guard max >= 1 else { throw AppNorthError.invalidArgument("max must be 1 to 2147483647, not \(max)") }
            try returnString(outJSON, "out_json") { try events.pendingJSON(max: Int(max)) }
        }
    }
}
