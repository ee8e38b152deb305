#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CacheSystem

/// A real child (`/bin/sleep`), limited, read through `/proc` and reaped
/// as the variant pool does its helpers.
@Suite struct ChildProcessTests {
    /// Starts `argv` (posix_spawn: the test owns the child; nothing else reaps it).
    static func spawn(_ argv: [String]) throws -> ChildProcess {
        var pid: pid_t = 0
        let args: [UnsafeMutablePointer<CChar>?] = argv.map { (s: String) in strdup(s) } + [nil]
        defer { for a in args { free(a) } }
        let rc = args.withUnsafeBufferPointer { posix_spawn(&pid, argv[0], nil, nil, UnsafeMutablePointer(mutating: $0.baseAddress!), environ) }
        guard rc == 0 else { throw SystemError("posix_spawn", argv[0], errno: rc) }
        return ChildProcess(pid: pid)
    }

    static func sleeper() throws -> ChildProcess { try spawn(["/bin/sleep", "30"]) }

    @Test func limitsSetFromOutsideShowInItsProcLimits() throws {
        let child = try Self.sleeper()
        defer { _ = child.killAndReap() }
        try child.setLimit(.addressSpace, soft: 1 << 30, hard: 1 << 30)
        try child.setLimit(.cpuSeconds, soft: 5, hard: 7)
        try child.setLimit(.tasks, soft: 4096, hard: 4096)
        let limits = String(decoding: try FileSystem.read("/proc/\(child.pid)/limits", limit: 64 << 10), as: UTF8.self)
        func row(_ r: ChildProcess.Resource) -> [Substring] {
            let line = limits.split(separator: "\n").first { $0.hasPrefix(r.procName) } ?? ""
            return line.dropFirst(r.procName.count).split(separator: " ")
        }
        #expect(row(.addressSpace).prefix(2) == ["1073741824", "1073741824"], "\(limits)")
        #expect(row(.cpuSeconds).prefix(2) == ["5", "7"], "\(limits)")
        #expect(row(.tasks).prefix(2) == ["4096", "4096"], "\(limits)")
        // Above the hard limit takes a privilege: said, not ignored (root may).
        if getuid() != 0 { #expect(throws: SystemError.self) { try child.setLimit(.cpuSeconds, soft: 5, hard: 9) } }
    }

    @Test func itsStatusAndCPUTimeAreReadUntilItIsReaped() throws {
        let child = try Self.sleeper()
        let status = child.status()
        #expect(status.uid == getuid())
        #expect(status.threads == 1)
        #expect(status.seccompMode != nil, "every kernel cached runs on has seccomp")
        #expect(child.cpuTime() != nil)
        #expect(child.reapIfEnded() == nil, "it sleeps")
        let ended = child.killAndReap()
        #expect(ended.map { $0 & 0x7F } == SIGKILL)
        #expect(child.reapIfEnded() == nil, "reaped once")
        #expect(child.status() == ProcessStatus(""), "a reaped pid has no status")
        #expect(child.cpuTime() == nil)
    }

    @Test func aChildThatEndsByItselfIsReapedWithItsStatus() throws {
        let child = try Self.spawn(["/bin/sh", "-c", "exit 3"])
        let status = child.reap(attempts: 500, interval: .milliseconds(10))
        #expect(status.map { ($0 >> 8) & 0xFF } == 3)
    }

    @Test func theStatusFieldsAParentChecks() {
        let text = "Name:\tcached-variant\nUid:\t1000\t1000\t1000\t1000\nThreads:\t3\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n"
        let s = ProcessStatus(text)
        #expect(s.uid == 1000 && s.threads == 3 && s.seccompMode == 2 && s.seccompFilters == 2 && s.noNewPrivileges)
        let bare = ProcessStatus("Name:\tx\nNoNewPrivs:\t0\n")
        #expect(bare.uid == nil && bare.seccompFilters == nil && !bare.noNewPrivileges)
    }

    @Test func theTasksOfThisUserCountThisProcesssThreads() throws {
        let own = try #require(ChildProcess.current.status().threads)
        #expect(try ChildProcess.tasks(ofUser: getuid()) >= own)
    }
}
