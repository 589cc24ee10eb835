import Glibc
import Synchronization

/// Log levels, matching APPNORTH_LOG_* in the C header.
public enum LogLevel: Int32, Sendable, Comparable {
    case debug = 0, info = 1, warning = 2, error = 3
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    var name: String {
        switch self {
        case .debug: return "DEBUG"
        case .info: return "INFO"
        case .warning: return "WARNING"
        case .error: return "ERROR"
        }
    }
}

/// Where log lines go: a host-set sink, silent by default. Callers must
/// never pass secrets, tokens, identity values or payloads into a message,
/// and must never log while holding a lock (the sink is host code).
///
/// Copies share their minimum level, so `setMinimum` on a client's logger
/// reaches every handle made with that client. `APPNORTH_DEBUG=1` in the
/// environment (read once) lowers every logger to DEBUG and gives one with
/// no sink a stderr sink, so any host, C included, can see what the
/// library does without code changes.
public struct Logger: Sendable {
    public typealias Sink = @Sendable (LogLevel, String) -> Void

    let sink: Sink?
    let level: LevelBox

    public init(minimum: LogLevel = .info, sink: Sink? = nil) {
        self.sink = sink ?? (Self.debugFromEnvironment ? Self.stderrSink : nil)
        self.level = LevelBox(minimum)
    }

    /// A logger with this sink that shares `level` with another's copies.
    init(level: LevelBox, sink: @escaping Sink) {
        self.sink = sink
        self.level = level
    }

    public static let silent = Logger()

    /// The lowest level passed to the sink.
    public var minimum: LogLevel { Self.debugFromEnvironment ? .debug : level.value }

    /// Changes the minimum level of this logger and of all its copies.
    public func setMinimum(_ minimum: LogLevel) { level.value = minimum }

    /// True when a line at `level` would reach a sink: lets callers skip
    /// work (timing, formatting) that only a log line needs.
    public func enabled(_ level: LogLevel) -> Bool { sink != nil && level >= minimum }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard let sink, level >= minimum else { return }
        // No line of the library's holds a control character; one from
        // outside (a server's text) is escaped here, for every sink.
        sink(level, Text.escapingControls(message()))
    }

    // process-wide, not a ForkLocal: read once from the environment, which a child inherits.
    static let debugFromEnvironment: Bool = {
        guard let value = getenv("APPNORTH_DEBUG") else { return false }
        return String(cString: value) == "1"
    }()

    static let stderrSink: Sink = { level, message in
        var line = Array("appnorth \(level.name): \(message)\n".utf8)
        _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}

/// A log level shared by a logger's copies.
final class LevelBox: Sendable {
    private let raw: Atomic<Int32>

    init(_ level: LogLevel) { raw = Atomic(level.rawValue) }

    var value: LogLevel {
        get { LogLevel(rawValue: raw.load(ordering: .relaxed)) ?? .info }
        set { raw.store(newValue.rawValue, ordering: .relaxed) }
    }
}
