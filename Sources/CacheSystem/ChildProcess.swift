#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A process by its pid, as a parent sees it from outside: its resource
/// limits set (`prlimit(2)`), what `/proc` says of it (proc(5)), whether
/// it has ended. It neither starts nor owns the process: the variant
/// pool's `HelperProcess` does, and asks this.
public struct ChildProcess: Sendable, Equatable {
    public let pid: Int32

    public init(pid: Int32) { self.pid = pid }

    /// This process itself.
    public static var current: ChildProcess { ChildProcess(pid: getpid()) }

    /// The limits a parent sets on a child, by their meaning, not their
    /// number (getrlimit(2)).
    public enum Resource: Sendable, CaseIterable {
        /// `RLIMIT_AS`: bytes of address space.
        case addressSpace
        /// `RLIMIT_CPU`: seconds of CPU time; past the soft limit SIGXCPU,
        /// at the hard one SIGKILL.
        case cpuSeconds
        /// `RLIMIT_NPROC`: tasks (threads) of the process's real user.
        case tasks

        var number: Int32 {
            switch self {
            case .addressSpace: Int32(RLIMIT_AS.rawValue)
            case .cpuSeconds: Int32(RLIMIT_CPU.rawValue)
            case .tasks: Int32(__RLIMIT_NPROC.rawValue)  // RLIMIT_NPROC is a macro Swift does not import
            }
        }

        /// Its name in `/proc/PID/limits`.
        public var procName: String {
            switch self {
            case .addressSpace: "Max address space"
            case .cpuSeconds: "Max cpu time"
            case .tasks: "Max processes"
            }
        }
    }

    /// Sets `resource`'s soft and hard limits (raising a hard one takes a
    /// privilege).
    public func setLimit(_ resource: Resource, soft: UInt64, hard: UInt64) throws(SystemError) {
        guard clinux_set_limit(pid, resource.number, soft, hard) == 0 else {
            throw SystemError("prlimit", "\(resource) of pid \(pid)")
        }
    }

    /// `/proc/PID/status`, read now; empty (every field nil) when it cannot
    /// be read, as for a process that has ended.
    public func status() -> ProcessStatus { ProcessStatus(procFile("status")) }

    /// The CPU time (user and system) it has used so far, from
    /// `/proc/PID/stat`; nil when that cannot be read.
    public func cpuTime() -> Duration? {
        let stat = procFile("stat")
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15 (1-based).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return .clampedSeconds((user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// Its wait status if it has ended, reaping it (`waitpid` with
    /// `WNOHANG`); nil while it runs. For a child of this process only, and
    /// once: a reaped pid is no longer this process's to ask about.
    public func reapIfEnded() -> Int32? {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == pid ? status : nil
    }

    /// Kills it (SIGKILL) and waits for it to end; its wait status, or nil
    /// when it could not be reaped (not this process's child).
    public func killAndReap() -> Int32? {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        return waitpid(pid, &status, 0) == pid ? status : nil
    }

    /// Its wait status once it has ended, asked every `interval` up to
    /// `attempts` times; nil if it still runs.
    public func reap(attempts: Int, interval: Duration) -> Int32? {
        for _ in 0..<attempts {
            if let status = reapIfEnded() { return status }
            usleep(UInt32(clamping: interval.wholeNanoseconds / 1000))
        }
        return nil
    }

    /// The tasks (threads of every process) of user `uid` now: what
    /// `RLIMIT_NPROC` counts against.
    public static func tasks(ofUser uid: uid_t) throws(SystemError) -> Int {
        var tasks = 0
        for name in try FileSystem.list("/proc") where name.utf8.allSatisfy(ASCII.isDigit) {
            guard let pid = Int32(name) else { continue }
            let status = ChildProcess(pid: pid).status()
            if status.uid == uid { tasks += status.threads ?? 0 }
        }
        return tasks
    }

    /// `/proc/PID/NAME` as text; empty when it cannot be read.
    private func procFile(_ name: String) -> String {
        String(decoding: (try? FileSystem.read("/proc/\(pid)/\(name)", limit: 64 << 10)) ?? [], as: UTF8.self)
    }
}

/// The fields of a `/proc/PID/status` that a parent checks (proc(5)).
public struct ProcessStatus: Sendable, Equatable {
    /// The real user id (the first of `Uid:`).
    public var uid: uid_t?
    /// `Threads:`.
    public var threads: Int?
    /// `Seccomp:`: 0 none, 1 strict, 2 filter.
    public var seccompMode: Int?
    /// `Seccomp_filters:`: how many filters the process runs under.
    public var seccompFilters: Int?
    /// `NoNewPrivs:` is 1.
    public var noNewPrivileges = false

    /// Parses the text of a status file; what is missing stays nil.
    public init(_ text: String) {
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = String(line[line.index(after: colon)...]).trimmed()
            switch line[..<colon] {
            case "Uid": uid = value.split(whereSeparator: { $0 == "\t" || $0 == " " }).first.flatMap { uid_t($0) }
            case "Threads": threads = Int(value)
            case "Seccomp": seccompMode = Int(value)
            case "Seccomp_filters": seccompFilters = Int(value)
            case "NoNewPrivs": noNewPrivileges = value == "1"
            default: break
            }
        }
    }
}
