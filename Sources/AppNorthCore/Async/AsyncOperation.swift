import Synchronization

/// One non-blocking call in flight: the id the host cancels it by, its
/// cancellation, and the handles it belongs to (freeing one of them
/// cancels it and waits for its completion).
///
/// Life (`OperationPhase`, kept by the table): `OperationTable.begin`
/// makes it (started); `launched` once its work is handed over (running);
/// a cancel (cancelled); `retire` as its completion begins (completing);
/// `end`, exactly once, after its completion has been delivered (completed).
package final class AsyncOperation: Sendable {
    /// Process-wide, never 0, never reused.
    package let id: UInt64
    /// Its one cancellation: given to the transfers and waits it makes,
    /// watched by the engine while it waits for a worker (`runOnWorker`).
    package let cancellation = CancellationToken()
    let owners: [ObjectIdentifier]
    /// Its phase; read and moved only with the table's lock held.
    nonisolated(unsafe) var phase = OperationPhase.started

    init(id: UInt64, owners: [ObjectIdentifier]) {
        self.id = id
        self.owners = owners
    }

    package var isCancelled: Bool { cancellation.isCancelled }
}

/// The operations in flight in this process, by id (for `cancel(id:)`) and
/// by owner (for a handle's free). Thread-safe; never calls host code.
package final class OperationTable: Sendable {
    /// This process's table (a fork() child's is its own: an operation
    /// of the parent, mid-way through `begin` or `end` at the fork, is no
    /// concern of the child's).
    package static var shared: OperationTable { current.value }
    private static let current = ForkLocal<OperationTable, Never> { OperationTable() }

    /// Operations one owner may have in flight; beyond it a start is
    /// refused with `.wrongState` (a host bug, or a loop without back-pressure).
    package static let maxPerOwner = 4096

    private struct State {
        var nextID: UInt64 = 1
        var byID: [UInt64: AsyncOperation] = [:]
        var perOwner: [ObjectIdentifier: Int] = [:]
        /// Run once the owner has no operation left (`whenIdle`).
        var whenIdle: [ObjectIdentifier: [@Sendable () -> Void]] = [:]
    }

    private let condition = Lock<Void>((), level: LockClass.operations)
    // Only touched with `condition` locked.
    nonisolated(unsafe) private var state = State()

    /// Registers a new operation of `owners` (the handle objects it uses).
    package func begin(owners: [AnyObject]) throws(AppNorthError) -> AsyncOperation {
        let keys = owners.map { ObjectIdentifier($0) }
        let made: AsyncOperation? = condition.locked {
            for key in keys where state.perOwner[key, default: 0] >= Self.maxPerOwner { return nil }
            let operation = AsyncOperation(id: state.nextID, owners: keys)
            state.nextID += 1
            state.byID[operation.id] = operation
            for key in keys { state.perOwner[key, default: 0] += 1 }
            return operation
        }
        guard let made else {
            throw .wrongState("\(Self.maxPerOwner) operations are already in flight on this handle")
        }
        return made
    }

    /// Its work was handed to the transfer thread or a worker.
    package func launched(_ operation: AsyncOperation) {
        condition.locked { _ = move(operation, .launched) }
    }

    /// Its completion is being delivered: from now on `cancel(id:)` does
    /// not find it (it still counts for its owners until `end`).
    package func retire(_ operation: AsyncOperation) {
        condition.locked {
            move(operation, .completionBegins)
            state.byID.removeValue(forKey: operation.id)
        }
    }

    /// With the lock held: applies `event`; false when it did nothing.
    @discardableResult
    private func move(_ operation: AsyncOperation, _ event: OperationPhase.Event) -> Bool {
        guard let next = operation.phase.after(event) else { return false }
        operation.phase = next
        return true
    }

    /// Ends an operation: its completion has been delivered. Once only.
    package func end(_ operation: AsyncOperation) {
        let idle = condition.locked { () -> [@Sendable () -> Void] in
            state.byID.removeValue(forKey: operation.id)
            guard move(operation, .completionDelivered) else { return [] }
            var idle: [@Sendable () -> Void] = []
            for key in operation.owners {
                let left = state.perOwner[key, default: 1] - 1
                state.perOwner[key] = left > 0 ? left : nil
                if left <= 0, let actions = state.whenIdle.removeValue(forKey: key) { idle += actions }
            }
            condition.broadcast()
            return idle
        }
        for action in idle { action() }
    }

    /// Runs `action` once `owner` has no operation in flight: now, on this
    /// thread, if it has none; otherwise on the thread that ends its last
    /// one, after that one's completion (no lock held).
    package func whenIdle(of owner: AnyObject, _ action: @escaping @Sendable () -> Void) {
        let key = ObjectIdentifier(owner)
        let now = condition.locked { () -> Bool in
            guard state.perOwner[key] != nil else { return true }
            state.whenIdle[key, default: []].append(action)
            return false
        }
        if now { action() }
    }

    /// Cancels the operation with this id. False when none is in flight.
    package func cancel(id: UInt64) -> Bool {
        let found = condition.locked { () -> AsyncOperation? in
            guard let operation = state.byID[id], operation.phase.isCancellable else { return nil }
            move(operation, .cancelRequested)
            return operation
        }
        guard let found else { return false }
        found.cancel()
        return true
    }

    /// Cancels every operation of `owner` in flight now.
    package func cancelAll(of owner: AnyObject) {
        let key = ObjectIdentifier(owner)
        let operations = condition.locked { () -> [AsyncOperation] in
            let mine = state.byID.values.filter { $0.owners.contains(key) && $0.phase.isCancellable }
            for operation in mine { move(operation, .cancelRequested) }
            return mine
        }
        for operation in operations { operation.cancel() }
    }

    /// Waits until `owner` has no operation in flight.
    package func waitForAll(of owner: AnyObject) {
        let key = ObjectIdentifier(owner)
        condition.locked { condition.wait(until: { state.perOwner[key] == nil }, deadline: nil) }
    }

    /// Operations of `owner` in flight now.
    package func count(of owner: AnyObject) -> Int {
        let key = ObjectIdentifier(owner)
        return condition.locked { state.perOwner[key] ?? 0 }
    }
}

extension AsyncOperation {
    package func cancel() {
        cancellation.cancel()
    }
}

extension LockClass {
    /// `OperationTable.condition`: the operations in flight.
    static let operations = LockClass.leaf("OperationTable.condition")
}
