/// What the host reads about the queue: stats and counts.
extension AppNorthEvents {
    // MARK: Stats

    /// Queued count and bytes, drops by reason, breaker state, last error,
    /// last flush time, as a JSON object.
    package func statsJSON() -> String {
        let choice = consentOwner.current
        drain.trimToLimits()
        let s = uploader.state.withLock { $0 }
        let root = JSON.object()
        let queued = store.directoryQueued
        root.set("queued", .int(Int64(queued.count)))
        root.set("queued_bytes", .int(Int64(queued.bytes)))
        // Everything queued in the data directory, by every handle: the
        // journal files among it, and the bytes the store takes on disk.
        root.set("journals", .int(Int64(queued.journals)))
        root.set("disk_bytes", .int(Int64(store.bytesOnDisk)))
        // Events purged at import count as consent drops too; drops past
        // the limits and damaged stretches are counted by the store.
        let counts = counters.snapshot(adding: [.consent: store.importer.consentDropped.load(ordering: .relaxed),
                                                .queueLimit: store.limits.dropped.count,
                                                .damaged: store.table.damagedDropped.load(ordering: .relaxed)])
        let dropped = JSON.object()
        for reason in EventCounters.DropReason.allCases {
            dropped.set(reason.key, .int(Int64(counts.dropped(reason))))
        }
        root.set("dropped", dropped)
        let breaker = JSON.object()
        breaker.set("open", .bool(s.breaker.isOpen))
        breaker.set("consecutive_failures", .int(Int64(s.breaker.consecutiveFailures)))
        breaker.set("threshold", .int(Int64(s.breaker.threshold)))
        root.set("breaker", breaker)
        if let error = s.lastError {
            let e = JSON.object()
            e.set("message", .string(error.message))
            e.set("http_status", .int(Int64(error.httpStatus)))
            root.set("last_error", e)
        } else {
            root.set("last_error", .null())
        }
        root.set("last_flush_ms", s.lastFlushMs.map { .int($0) } ?? .null())
        root.set("last_attempt_ms", s.lastAttemptMs.map { .int($0) } ?? .null())
        root.set("network_type", .string(s.networkType.name))
        root.set("batch_size", .int(Int64(s.networkType.batchSize)))
        root.set("consent", .string(choice.name))
        root.set("settings", settingsJSON())
        return root.serialized()
    }

    /// The settings in force: the options, or the config key's values
    /// over them (`remote`: whether the key sets anything).
    func settingsJSON() -> JSON {
        let now = settings.current
        let out = JSON.object()
        out.set("enabled", .bool(now.enabled))
        out.set("sample_rate", .double(now.sampleRate))
        out.set("sampled_in", .bool(settings.sampledIn))
        let blocked = JSON.array()
        for name in now.blockedEvents.sorted() { blocked.append(.string(name)) }
        out.set("blocked_events", blocked)
        out.set("flush_interval_ms", .int(Int64(now.flushIntervalMilliseconds)))
        out.set("batch_threshold", .int(Int64(now.batchThreshold)))
        out.set("remote", .bool(settings.remoteApplied))
        return out
    }

    package var queuedCount: Int {
        consentOwner.refresh()
        drain.trimToLimits()
        return store.directoryQueued.count
    }

    /// Events the server has accepted since this queue was opened.
    package var deliveredCount: Int { counters.delivered }

    // MARK: Read-back for the host's tests

    /// The queued events, oldest first, at most `max`, as a JSON array of
    /// the event objects a batch body carries (the elements of
    /// `{"events":[...]}`, byte for byte, as `BatchBody` splices them).
    /// Imports this handle's journal into the table first, on the calling
    /// thread, under the queue's limits (`QueueDrain.run`), so every event
    /// this handle tracked and still holds is included; another handle's or
    /// process's events are included once they are in the table (their own
    /// library thread imports them at each upload cycle and at close; orphan
    /// recovery those of ended processes). Events of a batch in flight are
    /// included: they leave when the server has acknowledged them.
    package func pendingJSON(max: Int) throws(AppNorthError) -> String {
        guard max >= 1 else { throw .invalidArgument("max must be at least 1") }
        try requireOpen()
        consentOwner.refresh()
        try drain.run()
        let events = try store.oldest(max)
        var text: [UInt8] = [UInt8(ascii: "[")]
        text.reserveCapacity(events.reduce(2) { $0 + $1.payload.count + 1 })
        for (index, event) in events.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            text += event.payload
        }
        text.append(UInt8(ascii: "]"))
        return String(decoding: text, as: UTF8.self)
    }
}
