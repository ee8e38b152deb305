import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// cachectl as a client: negative post ids on the command line, timeouts on
/// a daemon that does not answer, and sockets in directories another user
/// controls. The real cachectl, against a real daemon or a socket made here.
@Suite struct CachectlClientTests {
    // MARK: ids that look like options

    @Test func negativeAndZeroPostIdsAreIdsNotOptions() throws {
        let origin = try Origin()
        try origin.write("posts.json", #"""
            [{"userId": 1, "id": -5, "title": "minus five", "body": "m"},
             {"userId": 2, "id": 0, "title": "zero", "body": "z"},
             {"userId": 3, "id": 7, "title": "seven", "body": "s"}]
            """#)
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket
        let prefetch = try cachectl(["prefetch", "posts"], socket: s)
        #expect(prefetch.status == 0, "\(prefetch.stderr)")

        let minusFive = try cachectl(["get", "post", "-5"], socket: s)
        #expect(minusFive.status == 0, "\(minusFive.stderr)")
        #expect(minusFive.stdout.hasPrefix("Post -5 by user 1\nTitle: minus five\n"), "\(minusFive.stdout)")
        let zero = try cachectl(["get", "post", "0"], socket: s)
        #expect(zero.status == 0, "\(zero.stderr)")
        #expect(zero.stdout.hasPrefix("Post 0 by user 2\nTitle: zero\n"), "\(zero.stdout)")

        // Options still work before and after the id; `--` ends the options.
        for args in [["--json", "get", "post", "-5"], ["get", "post", "-5", "--json"], ["--json", "get", "post", "--", "-5"],
                     ["--json", "--", "get", "post", "-5"]] {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            let answer = try JSONParser.parse(Array(r.stdout.utf8.dropLast()))
            #expect(answer["post"]?["id"] == .number("-5") && answer["post"]?["title"] == .string("minus five"), "\(args): \(r.stdout)")
        }
        // A negative id the feed does not have is not found, not a usage error.
        let missing = try cachectl(["get", "post", "-6"], socket: s)
        #expect(missing.status == 4, "\(missing.stderr)")
        #expect(missing.stderr.contains("post -6 not found"), "\(missing.stderr)")
        // A negative row is a number too, and says why it is refused.
        let row = try cachectl(["get", "image", "-1"], socket: s)
        #expect(row.status == 2)
        #expect(row.stderr == "cachectl: row must be a non-negative integer, not \"-1\"\n", "\(row.stderr)")

        // --string asks for the string id first: the post stored as the integer
        // -6 is missing, so is "-6"; a negative id after it is the id. It goes
        // with get post and delete post alone.
        let string = try cachectl(["get", "post", "--string", "-6"], socket: s)
        #expect(string.status == 4 && string.stderr.contains(#"post "-6" not found"#), "\(string.stderr)")
        // delete post takes a negative id as get post does (it was "unknown option -6").
        for args in [["delete", "post", "-6"], ["delete", "post", "--string", "-6"]] {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 4 && r.stderr.contains("-6"), "\(args): \(r.stderr)")
        }
        for args in [["get", "posts", "--string"], ["--string", "status"], ["get", "image", "1", "--string"]] {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 2 && r.stderr == "cachectl: --string goes with get post ID and delete post ID\n", "\(args): \(r.stderr)")
        }

        // Unknown options are still errors, a number-like one too where no number is due.
        let unknown: [([String], String)] = [
            (["get", "post", "1", "-x"], "-x"), (["-5", "status"], "-5"), (["get", "posts", "-5"], "-5"),
            (["--bogus", "get", "post", "-5"], "--bogus"), (["get", "post", "-5x"], "-5x"),
        ]
        for (args, option) in unknown {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr == "cachectl: unknown option \(option) (see cachectl --help)\n", "\(args): \(r.stderr)")
        }
    }

    // MARK: timeouts

    /// The message for a daemon that does not answer.
    static func noAnswer(_ socket: String, _ seconds: String) -> String {
        "cachectl: no answer from cached at \(socket) within \(seconds) s (is it stopped? check systemctl status cached)\n"
    }

    @Test func aStoppedDaemonTimesOut() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket
        #expect(kill(daemon.pid, SIGSTOP) == 0)
        defer { kill(daemon.pid, SIGCONT) }

        let status = try runCachectl(["--socket", s, "--timeout", "1", "status"])
        #expect(status.finished, "cachectl still waiting after \(status.seconds) s")
        #expect(status.status == 3, "\(status.stderr)")
        #expect(status.stderr == Self.noAnswer(s, "1"), "\(status.stderr)")
        #expect(status.stdout.isEmpty)

        // The environment sets it too; fractions are allowed.
        let ping = try runCachectl(["--socket", s, "ping"], environment: ["CACHED_TIMEOUT": "0.5"])
        #expect(ping.finished && ping.status == 3, "\(ping.stderr)")
        #expect(ping.stderr == Self.noAnswer(s, "0.5"), "\(ping.stderr)")
        // The flag wins over the environment.
        let flag = try runCachectl(["--socket", s, "--timeout", "1", "ping"], environment: ["CACHED_TIMEOUT": "0"])
        #expect(flag.finished && flag.status == 3, "\(flag.stderr)")

        // A command that may take long gives up too: the daemon does not answer a ping either.
        for command in [["gc"], ["prefetch"], ["get", "image", "0"]] {
            let r = try runCachectl(["--socket", s, "--timeout", "1"] + command)
            #expect(r.finished && r.status == 3, "\(command): \(r.stderr)")
            #expect(r.stderr == Self.noAnswer(s, "1"), "\(command): \(r.stderr)")
        }

        // Without --timeout or CACHED_TIMEOUT, 10 s.
        let byDefault = try runCachectl(["--socket", s, "status"], limit: 60)
        #expect(byDefault.finished && byDefault.status == 3, "\(byDefault.stderr)")
        #expect(byDefault.stderr == Self.noAnswer(s, "10"), "\(byDefault.stderr)")

        // Continued, it answers the connections that were waiting and new ones.
        kill(daemon.pid, SIGCONT)
        let again = try runCachectl(["--socket", s, "--timeout", "20", "status"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(daemon.isRunning)
    }

    @Test func aListenerThatNeverAcceptsTimesOut() throws {
        let scratch = Scratch()
        let listener = try TestSocket(path: scratch.path + "/silent.sock", serving: nil)
        defer { listener.close() }
        for command in [["ping"], ["get", "post", "1"], ["prefetch"], ["verify"]] {
            let r = try runCachectl(["--socket", listener.path, "--timeout", "1"] + command)
            #expect(r.finished, "\(command): still waiting after \(r.seconds) s")
            #expect(r.status == 3, "\(command): \(r.stderr)")
            #expect(r.stderr == Self.noAnswer(listener.path, "1"), "\(command): \(r.stderr)")
        }
    }

    @Test func aFullListenBacklogTimesOutInConnect() throws {
        let scratch = Scratch()
        let listener = try TestSocket(path: scratch.path + "/full.sock", serving: nil, backlog: 0)
        defer { listener.close() }
        let queued = try listener.fillBacklog()
        #expect(queued >= 1)
        let r = try runCachectl(["--socket", listener.path, "--timeout", "1", "ping"])
        #expect(r.finished, "cachectl still in connect after \(r.seconds) s")
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr == Self.noAnswer(listener.path, "1"), "\(r.stderr)")
    }

    /// A daemon that is alive but slow (a read-through download or a
    /// prefetch that waits on the origin) is not cut, whatever the timeout.
    @Test func aBusyDaemonIsWaitedFor() throws {
        let origin = try Origin()
        try origin.write("images/manifest.json", #"[{"url": "/fault/hang/4/images/01-sunrise.png"}, {"url": "/fault/hang/4/images/02-ocean.png"}]"#)
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket
        let image = try runCachectl(["--socket", s, "--timeout", "1", "get", "image", "0"], limit: 60)
        #expect(image.status == 0, "\(image.stderr)")
        #expect(image.stdout.hasPrefix("Row 0: "), "\(image.stdout)")
        #expect(image.seconds >= 3, "the download took the origin's 4 s: \(image.seconds) s")
        let prefetch = try runCachectl(["--socket", s, "--timeout", "1", "prefetch", "images"], limit: 60)
        #expect(prefetch.status == 0, "\(prefetch.stderr)")
        #expect(try daemon.call("get_image", [("row", num(1)), ("fetch", .bool(false))])["ok"] == .bool(true))
    }

    @Test func badTimeoutsAreUsageErrors() throws {
        let scratch = Scratch()
        let s = scratch.path + "/none.sock"
        for value in ["x", "-1", "inf", "nan", ""] {
            let r = try runCachectl(["--socket", s, "--timeout", value, "ping"])
            #expect(r.status == 2, "\(value): \(r.stderr)")
            #expect(r.stderr == "cachectl: --timeout needs a number of seconds (0 for no limit), not \"\(value)\"\n", "\(r.stderr)")
        }
        let missing = try runCachectl(["--socket", s, "ping", "--timeout"])
        #expect(missing.status == 2 && missing.stderr == "cachectl: --timeout needs a number of seconds (0 for no limit)\n", "\(missing.stderr)")
        let env = try runCachectl(["--socket", s, "ping"], environment: ["CACHED_TIMEOUT": "soon"])
        #expect(env.status == 2 && env.stderr == "cachectl: CACHED_TIMEOUT must be a number of seconds (0 for no limit), not \"soon\"\n", "\(env.stderr)")
        let equals = try runCachectl(["--socket", s, "--timeout=2", "ping"])
        #expect(equals.status == 3 && equals.stderr.contains("no socket at \(s)"), "\(equals.stderr)")
    }

    /// The bash completion knows --timeout takes a value.
    @Test func completionSkipsTheTimeoutsValue() throws {
        #expect(try CompletionTests.complete(["cachectl", "--ti"]) == ["--timeout"])
        #expect(try CompletionTests.complete(["cachectl", "--timeout", "5", "g"]) == ["gc", "get"])
        #expect(try CompletionTests.complete(["cachectl", "--timeout", ""]) == [])
    }

    // MARK: sockets in directories others control

    static let forged = #"{"ok":true,"post":{"userId":666,"id":1,"title":"forged","body":"not from cached"}}"#
    static let nobody: uid_t = 65534

    @Test func aSocketInADirectoryOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let dir = scratch.path + "/shared"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        #expect(chown(dir, Self.nobody, gid_t(Self.nobody)) == 0 && chmod(dir, 0o777) == 0)
        let server = try TestSocket(path: dir + "/cached.sock", serving: Self.forged)
        defer { server.close() }

        for (args, env) in [(["--socket", server.path, "get", "post", "1"], [String: String]()),
                            (["get", "post", "1"], ["CACHED_SOCKET": server.path])] {
            let r = try runCachectl(args, environment: env)
            #expect(r.status == 1, "\(r.stderr)")
            #expect(r.stdout.isEmpty, "nothing forged is printed: \(r.stdout)")
            #expect(r.stderr == "cachectl: refusing to connect to cached at \(server.path): \(dir) (owner nobody (uid 65534), mode 777) " +
                    "can be written by every user, who could replace the socket in it (chmod go-w \(dir), " +
                    "or give the daemon a socket in a directory only its owner can write)\n", "\(r.stderr)")
        }
        #expect(server.accepted == 0, "cachectl never connected")

        // Group-writable is refused as well; sticky helps only in root's directories.
        #expect(chmod(dir, 0o770) == 0)
        let group = try runCachectl(["--socket", server.path, "ping"])
        #expect(group.status == 1 && group.stderr.contains("mode 770) can be written by its group"), "\(group.stderr)")
        #expect(chmod(dir, 0o1777) == 0)
        let sticky = try runCachectl(["--socket", server.path, "ping"])
        #expect(sticky.status == 1 && sticky.stderr.contains("mode 1777) can be written by every user"), "\(sticky.stderr)")
        #expect(server.accepted == 0)

        // Another user's directory that only they can write (issue 33): that
        // user could still replace the socket, so it is refused unless
        // --socket names it (the caller trusts that user's daemon).
        #expect(chmod(dir, 0o755) == 0)
        let unnamed = try runCachectl(["get", "post", "1"], environment: ["CACHED_SOCKET": server.path])
        #expect(unnamed.status == 1 && unnamed.stdout.isEmpty, "\(unnamed.stderr)")
        #expect(unnamed.stderr == "cachectl: refusing to connect to cached at \(server.path): \(dir) is owned by nobody (uid 65534), not by root or you, "
                + "who could replace the socket in it (if you trust that user, name the socket with --socket \(dir)/...)\n", "\(unnamed.stderr)")
        #expect(server.accepted == 0)
        let owned = try runCachectl(["--socket", server.path, "get", "post", "1"])
        #expect(owned.status == 0, "\(owned.stderr)")
        #expect(owned.stdout.hasPrefix("Post 1 by user 666"), "\(owned.stdout)")
        #expect(server.accepted == 1)
    }

    /// The units give no service `/run/cached` (issue 33): under
    /// `DynamicUser=`, `RuntimeDirectory=cached` would make it the user of
    /// whichever service started first, able to replace another instance's
    /// socket. The socket units make it, as root's.
    @Test func noUnitTakesTheSharedRuntimeDirectory() throws {
        let units = try FileManager.default.contentsOfDirectory(atPath: Paths.packageRoot + "/systemd")
        for unit in units {
            let text = try String(contentsOfFile: Paths.packageRoot + "/systemd/" + unit, encoding: .utf8)
            let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
            #expect(!lines.contains { $0.hasPrefix("RuntimeDirectory") }, "\(unit) takes a runtime directory")
            for listen in lines where listen.hasPrefix("ListenStream=/") {
                #expect(listen.hasPrefix("ListenStream=/run/cached/") && listen.split(separator: "/").count == 4, "\(unit): \(listen)")
            }
        }
    }

    /// The per-user default `/tmp/cached-<uid>` (no XDG_RUNTIME_DIR) must be
    /// the caller's own: cachectl runs as nobody, with that directory made
    /// first by another user (uid 1) with mode 0777 and a socket in it.
    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/tmp/cached-65534"), "/tmp/cached-65534 exists; not touching it"))
    func theDefaultPerUserDirectoryMustBeTheCallers() throws {
        let dir = "/tmp/cached-65534"
        #expect(mkdir(dir, 0o700) == 0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(chown(dir, 1, 1) == 0 && chmod(dir, 0o777) == 0)
        let server = try TestSocket(path: dir + "/cached.sock", serving: Self.forged)
        defer { server.close() }

        let planted = try runCachectl(["get", "post", "1"], asUser: Self.nobody)
        #expect(planted.status == 1, "\(planted.stderr)")
        #expect(planted.stdout.isEmpty, "nothing forged is printed: \(planted.stdout)")
        #expect(planted.stderr.hasPrefix("cachectl: refusing to connect to cached at \(dir)/cached.sock: \(dir) is owned by uid 1, not by uid 65534"),
                "\(planted.stderr)")
        #expect(server.accepted == 0, "cachectl never connected")

        // Even with only its owner able to write it, another user's directory is not the caller's.
        #expect(chmod(dir, 0o755) == 0)
        let foreign = try runCachectl(["get", "post", "1"], asUser: Self.nobody)
        #expect(foreign.status == 1 && foreign.stderr.contains("is owned by uid 1, not by uid 65534"), "\(foreign.stderr)")
        // The caller's own directory, but writable by others.
        #expect(chown(dir, Self.nobody, gid_t(Self.nobody)) == 0 && chmod(dir, 0o777) == 0)
        let writable = try runCachectl(["get", "post", "1"], asUser: Self.nobody)
        #expect(writable.status == 1 && writable.stderr.contains("can be written by every user (mode 777)"), "\(writable.stderr)")
        #expect(server.accepted == 0)

        // The caller's own private directory is used.
        #expect(chmod(dir, 0o700) == 0)
        let mine = try runCachectl(["get", "post", "1"], asUser: Self.nobody)
        #expect(mine.status == 0, "\(mine.stderr)")
        #expect(mine.stdout.hasPrefix("Post 1 by user 666"), "\(mine.stdout)")
        #expect(server.accepted == 1)
    }
}

/// How a cachectl run ended.
struct TimedRun {
    var status: Int32
    var stdout: String
    var stderr: String
    var seconds: Double
    /// False when it was still running at the limit and was killed.
    var finished: Bool
}

/// Runs cachectl with an upper bound on its time (killed after `limit` s),
/// without CACHED_SOCKET, CACHED_TIMEOUT, XDG_RUNTIME_DIR or
/// RUNTIME_DIRECTORY from this environment, optionally as another user.
func runCachectl(_ args: [String], environment extra: [String: String] = [:], asUser uid: uid_t? = nil,
                 limit: Double = 15) throws -> TimedRun {
    let scratch = Scratch()
    let outPath = scratch.path + "/out", errPath = scratch.path + "/err"
    for path in [outPath, errPath] { _ = FileManager.default.createFile(atPath: path, contents: nil) }
    let p = Process()
    if let uid {
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", Paths.cachectl] + args
    } else {
        p.executableURL = URL(fileURLWithPath: Paths.cachectl)
        p.arguments = args
    }
    var env = ProcessInfo.processInfo.environment
    for key in ["CACHED_SOCKET", "CACHED_TIMEOUT", "XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY"] { env.removeValue(forKey: key) }
    env.merge(extra) { _, new in new }
    p.environment = env
    p.standardOutput = FileHandle(forWritingAtPath: outPath)
    p.standardError = FileHandle(forWritingAtPath: errPath)
    p.standardInput = FileHandle.nullDevice
    let start = Date()
    try p.run()
    let finished = waitUntil(limit) { !p.isRunning }
    if !finished { kill(p.processIdentifier, SIGKILL) }
    p.waitUntilExit()
    let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    return TimedRun(status: p.terminationStatus, stdout: read(outPath), stderr: read(errPath),
                    seconds: Date().timeIntervalSince(start), finished: finished)
}

/// A Unix socket made here, not by cached: one that listens and never
/// accepts (`serving: nil`), or a fake daemon that answers every request
/// line with `serving` and counts the connections it accepted.
final class TestSocket: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let state = Locked((accepted: 0, stopping: false))
    private let done = DispatchSemaphore(value: 0)
    private var clients: [Int32] = []
    private var serving: Bool

    init(path: String, serving answer: String?, backlog: Int32 = 16) throws {
        self.path = path
        let sock = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard sock >= 0 else { throw HarnessError("socket: \(errno)") }
        var addr = TestSocket.address(path)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0, chmod(path, 0o666) == 0, listen(sock, backlog) == 0 else {
            Glibc.close(sock)
            throw HarnessError("cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        fd = sock
        serving = answer != nil
        if let answer {
            let line = Array((answer + "\n").utf8)
            Thread { [self] in serve(line) }.start()
        }
    }

    static func address(_ path: String) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    var accepted: Int { state.withLock { $0.accepted } }

    /// Accepts connections until closed; answers each line with `line`.
    private func serve(_ line: [UInt8]) {
        while !state.withLock({ $0.stopping }) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) == 1 else { continue }
            let c = accept(fd, nil, nil)
            guard c >= 0 else { continue }
            state.withLock { $0.accepted += 1 }
            var byte: UInt8 = 0
            while recv(c, &byte, 1, 0) == 1 {
                if byte == UInt8(ascii: "\n") { _ = line.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
            }
            Glibc.close(c)
        }
        done.signal()
    }

    /// Connects non-blocking clients until the listen backlog is full; how many.
    func fillBacklog() throws -> Int {
        while clients.count < 10_000 {
            let c = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var addr = TestSocket.address(path)
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(c, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            if rc != 0 {
                let e = errno
                Glibc.close(c)
                guard e == EAGAIN else { throw HarnessError("connect: \(String(cString: strerror(e)))") }
                return clients.count
            }
            clients.append(c)
        }
        throw HarnessError("the backlog never filled")
    }

    func close() {
        if serving {
            state.withLock { $0.stopping = true }
            done.wait()
            serving = false
        }
        for c in clients { Glibc.close(c) }
        clients = []
        Glibc.close(fd)
        unlink(path)
    }
}
