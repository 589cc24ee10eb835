/// Log levels, matching APPNORTH_LOG_* in the C header.
public enum LogLevel: Int32, Sendable, Comparable {
    case debug = 0, info = 1, warning = 2, error = 3
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where log lines go: a host-set sink, silent by default. Callers must
/// never pass secrets, tokens or identity values into a message, and must
/// never log while holding a lock (the sink is host code).
public struct Logger: Sendable {
    public typealias Sink = @Sendable (LogLevel, String) -> Void

    let sink: Sink?
    let minimum: LogLevel

    public init(minimum: LogLevel = .info, sink: Sink? = nil) {
        self.sink = sink
        self.minimum = minimum
    }

    public static let silent = Logger()

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard let sink, level >= minimum else { return }
        sink(level, message())
    }
}
