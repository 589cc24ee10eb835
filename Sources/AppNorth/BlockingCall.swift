import AppNorthCore
import Dispatch
import Foundation
import Synchronization

/// Runs one of the core's blocking calls from async code: the call runs on
/// a library thread (`BlockingWorkers`) while the calling task is
/// suspended, and resumes it with the result.
///
/// Cancellation is per call. When the task is cancelled before the call
/// starts, the call never runs and `CancellationError` is thrown. When it is
/// cancelled while the call runs, the call's own operation is cancelled
/// (`OperationScope`: every request the call makes, a config fetch's, a
/// flush's wait, ends at once); the core's answer to that
/// (`AppNorthError.cancelled`) is thrown as `CancellationError`, while a
/// queue submit, which the core queues on a cancel, returns its `false`.
/// Other tasks' requests on the same client go on.
enum BlockingCall {
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let call = CallState()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let submitted = BlockingWorkers.shared.submit {
                    continuation.resume(with: Result { try call.run(work) })
                }
                if !submitted { continuation.resume(throwing: AppNorthError.internal("cannot start a worker thread")) }
            }
        } onCancel: {
            call.cancel()
        }
    }

    /// Kept for the call sites that name the client: the cancel no longer
    /// goes through it (it would end every request on the client).
    static func run<T: Sendable>(cancelling client: AppNorthClient?,
                                 _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(work)
    }
}

/// One call's progress, shared by the worker thread and the cancel handler.
private final class CallState: Sendable {
    private let operation = CancellationToken()

    func run<T>(_ work: () throws -> T) throws -> T {
        if operation.isCancelled { throw CancellationError() }
        do {
            return try OperationScope.with(operation) { try work() }
        } catch AppNorthError.cancelled(let message) {
            if operation.isCancelled { throw CancellationError() }
            throw AppNorthError.cancelled(message)
        }
    }

    /// From any thread; the call's requests end at once, later ones at start.
    func cancel() {
        operation.cancel()
    }
}

/// Waits, on a library thread, for async host code (a host's storage
/// actor). Called only by the core while it runs on `BlockingWorkers`,
/// never on a cooperative-pool thread.
func waitForAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let slot = ResultSlot<T>()
    Task.detached {
        do {
            slot.fill(.success(try await body()))
        } catch {
            slot.fill(.failure(error))
        }
    }
    return try BlockingWorkers.shared.whileWaiting { slot.wait() }.get()
}

/// A result handed from a task to a waiting thread.
private final class ResultSlot<T: Sendable>: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let value = Mutex<Result<T, any Error>?>(nil)

    func fill(_ result: Result<T, any Error>) {
        value.withLock { $0 = result }
        done.signal()
    }

    func wait() -> Result<T, any Error> {
        done.wait()
        return value.withLock { $0 } ?? .failure(AppNorthError.internal("host storage call ended without a result"))
    }
}
