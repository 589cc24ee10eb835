import Glibc

/// The operation the calling thread works for, so that a blocking call made
/// on its behalf (a queue flush's requests, a config fetch, a flush's wait)
/// can be cancelled on its own, and counts its timeout from the
/// operation's start: every transfer started on this thread while a scope
/// is active ends with `.cancelled` once its cancellation is cancelled
/// (transfers of other operations go on), and the first request made in a
/// scope that has a `firstRequestBy` deadline must end by it (the time the
/// operation waited for a worker comes off that request's timeout; a queue
/// flush's later requests each have their own).
///
/// Used by the worker pool behind the non-blocking calls and by the Swift
/// product's async calls. A thread-specific value (one pthread key): no
/// cost for a thread outside any scope beyond one pthread_getspecific.
package enum OperationScope {
    /// One active scope; touched only by its thread.
    private final class Frame {
        let cancellation: CancellationToken
        var firstRequestBy: Deadline?

        init(_ cancellation: CancellationToken, _ firstRequestBy: Deadline?) {
            self.cancellation = cancellation
            self.firstRequestBy = firstRequestBy
        }
    }

    // process-wide, not a ForkLocal: a pthread key, valid in a child (a thread's value is its own).
    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    private static var frame: Frame? {
        guard let key, let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<Frame>.fromOpaque(raw).takeUnretainedValue()
    }

    /// The cancellation of the operation this thread runs, if any.
    package static var current: CancellationToken? { frame?.cancellation }

    /// The deadline the request about to start must meet (the first of
    /// its scope's), taken: nil for the requests after it, and outside a scope.
    static func takeRequestDeadline() -> Deadline? {
        guard let frame else { return nil }
        defer { frame.firstRequestBy = nil }
        return frame.firstRequestBy
    }

    /// Runs `body` as part of the operation `cancellation`, whose first
    /// request must end by `deadline` (nil: by its own timeout only). Nested
    /// scopes: the innermost wins, and the outer one comes back after.
    package static func with<R, E: Error>(_ cancellation: CancellationToken, firstRequestBy deadline: Deadline? = nil,
                                         _ body: () throws(E) -> R) throws(E) -> R {
        guard let key else { return try body() }
        let frame = Frame(cancellation, deadline)
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(frame).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try withExtendedLifetime(frame) { () throws(E) -> R in try body() }
    }
}
