/// When an automatic session ends: after `idleMilliseconds` without an
/// event, or once it is `maxMilliseconds` old (each 0: never). A value:
/// `EventSender` asks it when an event is made, never on a timer, so a
/// session only ever changes between two events. Times are the events'
/// wall milliseconds (the timestamps they carry); a clock set back never
/// ends a session (a negative gap is no gap).
package struct SessionPolicy: Sendable, Equatable {
    /// 30 minutes without an event (PostHog's, Mixpanel's, Amplitude's).
    package static let defaultIdleMilliseconds = 30 * 60 * 1000
    /// 24 hours at most (PostHog iOS `sessionMaxLengthThreshold`).
    package static let defaultMaxMilliseconds = 24 * 60 * 60 * 1000

    package var idleMilliseconds = defaultIdleMilliseconds
    package var maxMilliseconds = defaultMaxMilliseconds

    package init(idleMilliseconds: Int = defaultIdleMilliseconds, maxMilliseconds: Int = defaultMaxMilliseconds) {
        self.idleMilliseconds = idleMilliseconds
        self.maxMilliseconds = maxMilliseconds
    }

    /// Neither limit: the session only changes with `startSession`.
    package var isOff: Bool { idleMilliseconds == 0 && maxMilliseconds == 0 }

    /// Whether an event made at `now` starts a new session, the current one
    /// having started at `start` with its last event at `last`.
    @inline(__always)
    func isDue(now: Int64, start: Int64, last: Int64) -> Bool {
        (idleMilliseconds > 0 && now &- last >= Int64(idleMilliseconds))
            || (maxMilliseconds > 0 && now &- start >= Int64(maxMilliseconds))
    }

    package func validate() throws(AppNorthError) {
        guard (0...Int(Int32.max)).contains(idleMilliseconds) else {
            throw .invalidArgument("idle_timeout_ms must be 0 (off) to 2147483647")
        }
        guard (0...Int(Int32.max)).contains(maxMilliseconds) else {
            throw .invalidArgument("max_length_ms must be 0 (off) to 2147483647")
        }
    }
}
