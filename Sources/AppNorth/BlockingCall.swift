import AppNorthCore
import Dispatch
import Foundation
import Synchronization

/// Runs one of the core's blocking calls from async code: the call runs on
/// a library thread (`BlockingWorkers`) while the calling task is
/// suspended, and resumes it with the result.
///
/// Cancellation. When the task is cancelled before the call starts, the
/// call never runs and `CancellationError` is thrown. When it is cancelled
/// while the call runs, `client.cancelInFlight()` (the core's client cancel,
/// the one `appnorth_client_cancel` uses) ends the request in flight at
/// once; the core's answer to that (`AppNorthError.cancelled`) is thrown as
/// `CancellationError`, while a queue submit, which the core queues on a
/// cancel, returns its `false`. The client cancel ends every request in
/// flight on that client at that moment, including other tasks' ones
/// (they get `AppNorthError.cancelled`): give independently cancelled work
/// its own client when that matters.
enum BlockingCall {
    static func run<T: Sendable>(cancelling client: AppNorthClient? = nil,
                                 _ work: @escaping @Sendable () throws -> T) async throws -> T {
        let call = CallState()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                BlockingWorkers.shared.submit {
                    continuation.resume(with: Result { try call.run(work) })
                }
            }
        } onCancel: {
            call.cancel(client)
        }
    }
}

/// One call's progress, shared by the worker thread and the cancel handler.
private final class CallState: Sendable {
    private enum Phase { case waiting, running, finished }
    private let state = Mutex<(phase: Phase, cancelled: Bool)>((.waiting, false))

    func run<T>(_ work: () throws -> T) throws -> T {
        let cancelledEarly = state.withLock { s -> Bool in
            if !s.cancelled { s.phase = .running }
            return s.cancelled
        }
        if cancelledEarly { throw CancellationError() }
        defer { state.withLock { $0.phase = .finished } }
        do {
            return try work()
        } catch AppNorthError.cancelled(let message) {
            if state.withLock({ $0.cancelled }) { throw CancellationError() }
            throw AppNorthError.cancelled(message)
        }
    }

    func cancel(_ client: AppNorthClient?) {
        let running = state.withLock { s -> Bool in
            s.cancelled = true
            return s.phase == .running
        }
        guard running, let client else { return }
        cancelWhileRunning(client)
    }

    /// Cancels now, and again every 100 ms while the call still runs: a
    /// request that started just after a client cancel (between the check
    /// above and the transfer's start) is not touched by it.
    private func cancelWhileRunning(_ client: AppNorthClient) {
        guard state.withLock({ $0.phase == .running }) else { return }
        client.cancelInFlight()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
            cancelWhileRunning(client)
        }
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
