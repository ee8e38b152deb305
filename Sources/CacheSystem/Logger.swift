#if canImport(Glibc)
import Glibc
#endif

/// Syslog-style priorities, the subset the daemon uses.
public enum LogLevel: Int, Sendable, Comparable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    public init?(name: String) {
        switch name.lowercased() {
        case "error", "err": self = .error
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Writes log lines to stderr: `<N>message` when stderr is the journal
/// (`$JOURNAL_STREAM` names it), a timestamped line otherwise.
public final class Logger: Sendable {
    private let level: Locked<LogLevel>
    private let journal: Bool

    public init(level: LogLevel, environment: [String: String]) {
        self.level = Locked(level)
        journal = Logger.stderrIsJournal(environment["JOURNAL_STREAM"])
    }

    public func setLevel(_ l: LogLevel) { level.withLock { $0 = l } }

    public func log(_ l: LogLevel, _ message: @autoclosure () -> String) {
        guard l <= level.withLock({ $0 }) else { return }
        let line: String
        if journal {
            line = "<\(l.rawValue)>\(message())\n"
        } else {
            var t = time(nil)
            var tm = tm()
            gmtime_r(&t, &tm)
            let p = NumberText.padded
            let stamp = "\(p(Int(tm.tm_year) + 1900, 4))-\(p(Int(tm.tm_mon) + 1, 2))-\(p(Int(tm.tm_mday), 2))T" +
                "\(p(Int(tm.tm_hour), 2)):\(p(Int(tm.tm_min), 2)):\(p(Int(tm.tm_sec), 2))Z"
            line = "\(stamp) cached[\(getpid())] \(l.name): \(message())\n"
        }
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    public func error(_ m: @autoclosure () -> String) { log(.error, m()) }
    public func warning(_ m: @autoclosure () -> String) { log(.warning, m()) }
    public func notice(_ m: @autoclosure () -> String) { log(.notice, m()) }
    public func info(_ m: @autoclosure () -> String) { log(.info, m()) }
    public func debug(_ m: @autoclosure () -> String) { log(.debug, m()) }

    /// `$JOURNAL_STREAM` is `device:inode` of the journal's stream; compare with fd 2.
    static func stderrIsJournal(_ value: String?) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino
    }
}
