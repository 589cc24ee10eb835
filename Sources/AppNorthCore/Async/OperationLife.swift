/// A non-blocking call's life from its start to its end, in one place:
/// its start (registered, refused if one of its handles is being freed,
/// the shared threads held for its handles, its work launched), the race
/// with a free (`endAll`: cancelled, and waited for unless the freeing
/// thread is one its completion may need), and its end (retired, its
/// completion delivered, ended: exactly once). The C layer converts the
/// arguments and calls the host's completion; nothing else.
extension OperationTable {
    /// Starts one operation of `owners` (the handles it uses; freeing one
    /// ends it) and returns its id. `launch` hands its work over with a
    /// `finish` that runs exactly once, possibly before `start` returns,
    /// on whichever thread ends the work: `finish` retires the operation
    /// (a cancel by id no longer finds it), gives `deliver` the call of
    /// `complete` (the host's completion; `deliver` runs it now or queues
    /// it), then ends it. Throws, and nothing starts, when the table
    /// refuses it, when `beingFreed` says a handle's free has begun, or
    /// when `launch` throws.
    package func start<Outcome: Sendable>(
        owners: [AnyObject], beingFreed: (AnyObject) -> Bool,
        deliver: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
        complete: @escaping @Sendable (UInt64, Outcome) -> Void,
        launch: (AsyncOperation, @escaping @Sendable (Outcome) -> Void) throws -> Void
    ) throws -> UInt64 {
        let operation = try begin(owners: owners)
        // A start that entered its handle just before that handle's free
        // began, and begins only now: the free has cancelled the handle's
        // operations (or is about to: then it waits for this one), and may
        // have let go of the shared threads. Begin nothing: its work would
        // hold them again, for ever, on a freed handle.
        if owners.contains(where: beingFreed) {
            end(operation)
            throw AppNorthError.wrongState("the handle is being freed: no call may start once its _free function was called")
        }
        SharedThreads.hold(for: owners)  // until their free: the threads its work needs live
        let finish: @Sendable (Outcome) -> Void = { [self] outcome in
            retire(operation)
            deliver { complete(operation.id, outcome) }
            end(operation)
        }
        do {
            try launch(operation, finish)
            launched(operation)
        } catch {
            end(operation)
            throw error
        }
        return operation.id
    }

    /// A handle's teardown: cancels its operations in flight and, when
    /// `waiting`, waits until each one's completion has run
    /// (APPNORTH_E_CANCELLED, or its real outcome if it was finishing), then
    /// lets go of the shared threads (the last handle's free stops and
    /// joins them, here). Not `waiting` (a free from inside a host
    /// callback: this thread may be the one those completions need), the
    /// hold goes when the last of them ends.
    package func endAll(of owner: AnyObject, waiting: Bool) {
        cancelAll(of: owner)
        guard waiting else {
            let kept = KeptOwner(object: owner)  // alive until then: its identity is not reused
            whenIdle(of: owner) { SharedThreads.drop(for: kept.object) }
            return
        }
        waitForAll(of: owner)
        SharedThreads.drop(for: owner)
    }
}

/// A handle object kept for its identity only (never touched).
private struct KeptOwner: @unchecked Sendable {
    let object: AnyObject
}
