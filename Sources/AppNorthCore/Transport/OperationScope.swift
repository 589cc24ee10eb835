import Glibc

/// The operation the calling thread works for, so that a blocking call made
/// on its behalf (a queue flush's requests, a config fetch, a flush's wait)
/// can be cancelled on its own: every transfer started on this thread while
/// a scope is active ends with `.cancelled` once its cancellation is
/// cancelled, and transfers of other operations go on.
///
/// Used by the worker pool behind the non-blocking calls and by the Swift
/// product's async calls. A thread-specific value (one pthread key): no
/// cost for a thread outside any scope beyond one pthread_getspecific.
package enum OperationScope {
    private static let key: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// The cancellation of the operation this thread runs, if any.
    package static var current: CancellationToken? {
        guard let key, let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<CancellationToken>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Runs `body` as part of the operation `cancellation` (nested scopes:
    /// the innermost wins, and the outer one comes back after).
    package static func with<R, E: Error>(_ cancellation: CancellationToken,
                                         _ body: () throws(E) -> R) throws(E) -> R {
        guard let key else { return try body() }
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(cancellation).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try withExtendedLifetime(cancellation) { () throws(E) -> R in try body() }
    }
}
