/// The super properties half of the event queue's API: properties saved
/// in the data directory and merged into every event (`SuperPropertiesFile`;
/// `track` reads them through `EventSender.superProperties`).
extension AppNorthEvents {
    /// Saves the members of `json` (a JSON object), replacing those with
    /// the same keys; with `once`, a key already registered keeps its
    /// value. Every handle on the directory adds them from its next event.
    package func register(_ json: UnsafeBufferPointer<UInt8>, once: Bool = false) throws(AppNorthError) {
        try requireOpen()
        guard json.count <= options.maxEventBytes else {
            throw .tooLarge("properties_json is \(json.count) bytes; super properties may take \(options.maxEventBytes / 2)")
        }
        let members = try SuperPropertiesFile.members(of: json)
        _ = try superFile.change { value throws(AppNorthError) in
            for m in members { value.set(m, overwrite: !once) }
        }
    }

    package func register(_ json: String, once: Bool = false) throws(AppNorthError) {
        var json = json
        try EventTracker.withBytes(&json) { bytes throws(AppNorthError) in try register(bytes, once: once) }
    }

    /// Removes one super property; a key not registered is no error.
    package func unregister(_ key: String) throws(AppNorthError) {
        try requireOpen()
        _ = try superFile.change { value throws(AppNorthError) in _ = value.remove(Array(key.utf8)) }
    }

    /// The registered super properties as a JSON object's text.
    package func superPropertiesJSON() throws(AppNorthError) -> String {
        try requireOpen()
        return String(decoding: superFile.read().text, as: UTF8.self)
    }

    func clearSuperProperties() throws(AppNorthError) {
        _ = try superFile.change { value throws(AppNorthError) in value = SuperProperties() }
    }

    private var superFile: SuperPropertiesFile { sender.superFile! }
}
