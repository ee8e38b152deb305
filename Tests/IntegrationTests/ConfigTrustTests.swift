import Foundation
import Testing
import CacheProtocol

/// A configuration file another user owns or can write is refused by
/// `cached --check-config` and by the daemon, naming the fix; real files,
/// real owners (`nobody`), the real binary (docs/operations.md, "Security posture").
@Suite struct ConfigTrustTests {
    static func writeConfig(_ scratch: Scratch, name: String = "cached.conf") throws -> String {
        let conf = scratch.path + "/" + name
        try "posts-url = http://127.0.0.1:9/posts.json\n".write(toFile: conf, atomically: false, encoding: .utf8)
        #expect(chmod(conf, 0o644) == 0)
        return conf
    }

    static func check(_ conf: String) throws -> (status: Int32, output: String) {
        try runProgram(Paths.cached, ["--config", conf, "--check-config"])
    }

    @Test func aFileOwnedByRootOrTheDaemonsUserAndWritableByNoOneElseIsRead() throws {
        let scratch = Scratch()
        let conf = try Self.writeConfig(scratch)
        #expect(chown(conf, geteuid(), 0) == 0)
        let r = try Self.check(conf)
        #expect(r.status == 0 && r.output.contains("configuration OK (\(conf))"), "\(r)")
        #expect(r.output.contains("posts-url http://127.0.0.1:9/posts.json"), "\(r)")
    }

    /// `--config /dev/null` (mode 0666, root's): no configuration file, as before.
    @Test func devNullIsAnEmptyConfiguration() throws {
        let r = try Self.check("/dev/null")
        #expect(r.status == 0 && r.output.contains("configuration OK (/dev/null)"), "\(r)")
    }

    @Test func aFileAnotherUserOwnsIsRefused() throws {
        let scratch = Scratch()
        let conf = try Self.writeConfig(scratch)
        #expect(chown(conf, StoreSecurityTests.nobody, StoreSecurityTests.nobody) == 0)
        let r = try Self.check(conf)
        #expect(r.status == 2, "\(r)")
        let me = geteuid()
        #expect(r.output.contains("cached: refusing to read the configuration file: \(conf) is owned by uid 65534, not by "
                                  + (me == 0 ? "root" : "root or uid \(me)")), "\(r)")
        #expect(r.output.contains("(chown \(me) \(conf) and chmod go-w \(conf)"), "it names the fix: \(r)")
        #expect(!r.output.contains("configuration OK"))
        // The daemon itself refuses to start on it, before it opens a store.
        let daemon = try Daemon(origin: nil, arguments: ["--config", conf], scratch: scratch, waitReady: false)
        if !waitUntil(20, { !daemon.isRunning }) { daemon.kill9(); Issue.record("the daemon started: \(daemon.log)") }
        #expect(daemon.waitForExit() == 2)
        #expect(daemon.log.contains("refusing to read the configuration file: \(conf) is owned by uid 65534"), "\(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: daemon.store), "no store was made")
    }

    @Test(arguments: [(mode_t(0o666), "every user"), (mode_t(0o664), "its group"), (mode_t(0o646), "every user")])
    func aFileOthersCanWriteIsRefused(_ mode: mode_t, _ who: String) throws {
        let scratch = Scratch()
        let conf = try Self.writeConfig(scratch)
        #expect(chmod(conf, mode) == 0)
        let r = try Self.check(conf)
        #expect(r.status == 2, "\(r)")
        #expect(r.output.contains("refusing to read the configuration file: \(conf) can be written by \(who) "
                                  + "(mode \(String(mode, radix: 8))); another user could change what it says (chmod go-w \(conf))"), "\(r)")
    }

    @Test func aFileInADirectoryOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let open = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
        #expect(chmod(open, 0o777) == 0)
        let conf = open + "/cached.conf"
        try "posts-url = http://127.0.0.1:9/posts.json\n".write(toFile: conf, atomically: false, encoding: .utf8)
        #expect(chmod(conf, 0o644) == 0)
        let r = try Self.check(conf)
        #expect(r.status == 2, "\(r)")
        #expect(r.output.contains("refusing to read the configuration file: a directory above \(conf): \(open) can be written by every user"), "\(r)")
    }

    /// SIGHUP rereads the file under the same rule: a file made writable by
    /// others is not reloaded, and the running configuration stays.
    @Test func sighupRefusesAFileOthersCanWriteAndKeepsTheRunningOne() throws {
        let scratch = Scratch()
        let conf = try Self.writeConfig(scratch)
        let daemon = try Daemon(origin: nil, arguments: ["--config", conf], scratch: scratch)
        try "posts-url = http://127.0.0.1:9/other.json\n".write(toFile: conf, atomically: false, encoding: .utf8)
        #expect(chmod(conf, 0o666) == 0)
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(10) { daemon.log.contains("configuration not reloaded") }, "\(daemon.log)")
        #expect(daemon.log.contains("refusing to read the configuration file: \(conf) can be written by every user (mode 666)"), "\(daemon.log)")
        #expect(!daemon.log.contains("other.json"), "the file's new settings were not taken")
        #expect(try daemon.call("ping")["ok"] == .bool(true))
    }

    /// A link at the configuration path is refused, never followed (as before).
    @Test func aConfigPathThatIsALinkIsRefused() throws {
        let scratch = Scratch()
        let conf = try Self.writeConfig(scratch)
        let link = scratch.path + "/linked.conf"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: conf)
        let r = try Self.check(link)
        #expect(r.status == 2 && r.output.contains("refusing to read the configuration file: \(link) is a symbolic link; name the file itself"), "\(r)")
    }

    /// A link among the directories above the file is judged by its target,
    /// and the directories above that target are checked too: a target in a
    /// directory every user can write (not sticky) could be swapped.
    @Test func aFileReachedThroughALinkIntoADirectoryOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let open = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: open + "/etc", withIntermediateDirectories: true)
        #expect(chmod(open, 0o777) == 0 && chmod(open + "/etc", 0o755) == 0)
        try "posts-url = http://127.0.0.1:9/posts.json\n".write(toFile: open + "/etc/cached.conf", atomically: false, encoding: .utf8)
        #expect(chmod(open + "/etc/cached.conf", 0o644) == 0)
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/etc", withDestinationPath: open + "/etc")
        let conf = scratch.path + "/etc/cached.conf"
        let r = try Self.check(conf)
        #expect(r.status == 2, "\(r)")
        #expect(r.output.contains("refusing to read the configuration file: a directory above \(conf): \(open) can be written by every user "
                                  + "(mode 777); another user could replace what is in it (chmod go-w \(open)) (where \(scratch.path)/etc leads)"), "\(r)")
    }

    /// A FIFO at the path is opened without blocking and refused at once.
    @Test func aFIFOAtTheConfigPathIsRefusedPromptly() throws {
        let scratch = Scratch()
        let fifo = scratch.path + "/cached.conf"
        #expect(mkfifo(fifo, 0o644) == 0)
        let start = Date()
        let r = try Self.check(fifo)
        #expect(r.status == 2 && r.output.contains("refusing to read the configuration file: \(fifo) is not a regular file"), "\(r)")
        #expect(Date().timeIntervalSince(start) < 10, "it did not wait for a writer")
    }
}
