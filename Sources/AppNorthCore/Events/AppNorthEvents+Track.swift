/// The track half of the event queue's API (the gate is `EventTracker`).
extension AppNorthEvents {
    /// Queues an event durably. `propertiesJSON` must be a JSON object (or
    /// nil); it is stored and sent exactly as given. Returns false when the
    /// event was dropped because analytics consent is not given.
    @discardableResult
    package func track(_ name: String, propertiesJSON: String? = nil) throws(AppNorthError) -> Bool {
        var name = name
        guard var properties = propertiesJSON else {
            return try EventTracker.withBytes(&name) { name throws(AppNorthError) in try track(utf8: name, properties: nil) }
        }
        return try EventTracker.withBytes(&name) { name throws(AppNorthError) in
            try EventTracker.withBytes(&properties) { properties throws(AppNorthError) in try track(utf8: name, properties: properties) }
        }
    }

    /// `track` from text in memory (the C entry's: no String is made).
    /// `unchecked` names the arguments when their bytes are not known to be
    /// UTF-8 (C strings): they are checked then, and refused by those names.
    @inline(__always)
    package func track(utf8 name: UnsafeBufferPointer<UInt8>, properties: UnsafeBufferPointer<UInt8>?,
                      unchecked: (name: String, properties: String)? = nil) throws(AppNorthError) -> Bool {
        try tracker.track(utf8: name, properties: properties, unchecked: unchecked)
    }
}
