import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// systemd integration: readiness over $NOTIFY_SOCKET and socket activation.
@Suite struct ServiceTests {
    /// A datagram socket standing in for systemd's notify socket.
    final class NotifyListener {
        let path: String
        let fd: Int32
        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            guard rc == 0 else { throw HarnessError("cannot bind \(path)") }
            var tv = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        deinit { close(fd) }
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
    }

    @Test func readyIsSentOnceTheSocketAnswersAndStoppingOnSigterm() throws {
        let scratch = Scratch()
        let listener = try NotifyListener(path: scratch.path + "/notify")
        let socketPath = scratch.path + "/sock"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.cached)
        p.arguments = ["--store", scratch.path + "/store", "--socket", socketPath]
        p.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": listener.path]) { $1 }
        p.standardError = FileHandle.nullDevice
        try p.run()
        let ready = listener.receive() ?? ""
        #expect(ready.split(separator: "\n").contains("READY=1"), "\(ready)")
        #expect(ready.contains("STATUS=serving 0 posts"))
        // READY=1 means usable: the socket answers right away.
        #expect(try Client(socketPath: socketPath).call("ping")["ok"] == .bool(true))
        p.terminate()
        #expect(listener.receive() == "STOPPING=1")
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    @Test func socketActivationServesOnTheInheritedSocket() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate),
                     "systemd-socket-activate is missing: `make deps` installs the systemd package")
        let scratch = Scratch()
        let socketPath = scratch.path + "/activated.sock"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: activate)
        p.arguments = ["-l", socketPath, Paths.cached, "--store", scratch.path + "/store"]
        p.standardError = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() } }
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: socketPath) })
        // The first connection starts the daemon (same pid), which answers on fd 3.
        let answer = try Client(socketPath: socketPath).call("status")
        #expect(answer["ok"] == .bool(true), "\(answer)")
        #expect(answer["socket"] == .string("(inherited)"))
        p.terminate()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    /// An environment that names a descriptor which is not open (a wrapper
    /// that closed it) fails the start with the reason, rather than a loop
    /// that serves nothing.
    @Test func aClosedInheritedDescriptorFailsTheStartSayingWhy() throws {
        let scratch = Scratch()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "exec 3<&- 3>&-; LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" --store \"$1\"", Paths.cached, scratch.path + "/store"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 1, "\(text)")
        #expect(text.contains("a socket systemd passed cannot be used") && text.contains("inherited fd 3"), "\(text)")
    }

    /// Starts the real daemon with extra environment; stderr goes to `log`.
    static func start(_ scratch: Scratch, _ env: [String: String], arguments: [String] = [], log: String? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.cached)
        p.arguments = ["--store", scratch.path + "/store", "--socket", scratch.path + "/sock"] + arguments
        p.environment = ProcessInfo.processInfo.environment.merging(env) { $1 }
        if let log {
            if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
            p.standardError = FileHandle(forWritingAtPath: log)
        } else {
            p.standardError = FileHandle.nullDevice
        }
        try p.run()
        return p
    }

    @Test func theWatchdogIsPingedAndStatusFollowsPrefetches() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let listener = try NotifyListener(path: scratch.path + "/notify")
        let p = try Self.start(scratch, ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "1000000"],
                               arguments: ["--posts-url", origin.postsURL, "--images-url", origin.manifestURL])
        defer { p.terminate(); p.waitUntilExit() }
        #expect(listener.receive()?.contains("READY=1") == true)
        #expect(listener.receive() == "WATCHDOG=1")
        #expect(listener.receive() == "WATCHDOG=1")
        _ = try Client(socketPath: scratch.path + "/sock").call("prefetch")
        var sawStatus = false
        for _ in 0..<6 where !sawStatus {
            if let m = listener.receive(), m.hasPrefix("STATUS=") {
                sawStatus = true
                #expect(m == "STATUS=serving 100 posts, 16/16 images cached")
            }
        }
        #expect(sawStatus)
    }

    @Test func logLinesCarrySyslogPrioritiesWhenStderrIsTheJournal() throws {
        let scratch = Scratch()
        let log = scratch.path + "/journal.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        var st = stat()
        stat(log, &st)
        let p = try Self.start(scratch, ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"], log: log)
        #expect(waitUntil(10) { (try? Client(socketPath: scratch.path + "/sock").call("ping"))?["ok"] == .bool(true) })
        p.terminate()
        p.waitUntilExit()
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        #expect(!lines.isEmpty)
        #expect(lines.allSatisfy { $0.hasPrefix("<") && $0.dropFirst(2).hasPrefix(">") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("<5>cached") }, "notice-level start line")
    }

    @Test func aFileThatIsNotASocketIsNeverReplaced() throws {
        let scratch = Scratch()
        try "precious".write(toFile: scratch.path + "/sock", atomically: true, encoding: .utf8)
        let log = scratch.path + "/err.log"
        let p = try Self.start(scratch, [:], log: log)
        p.waitUntilExit()
        #expect(p.terminationStatus == 1)
        #expect((try String(contentsOfFile: log, encoding: .utf8)).contains("refusing to replace non-socket"))
        #expect(try String(contentsOfFile: scratch.path + "/sock", encoding: .utf8) == "precious")
    }

    /// Every unit the package installs: the single instance's and the templates.
    static let units = ["cached.service", "cached.socket", "cached-http.socket", "cached-prefetch.service", "cached-prefetch.timer",
                        "cached@.service", "cached@.socket", "cached-prefetch@.service", "cached-prefetch@.timer"]

    @Test func theUnitsVerifyAndRateOKWithSystemdAnalyze() throws {
        let analyze = "/usr/bin/systemd-analyze"
        try #require(FileManager.default.isExecutableFile(atPath: analyze), "systemd-analyze is missing: make deps installs systemd")
        let scratch = Scratch()
        for unit in Self.units {
            let text = try String(contentsOfFile: Paths.packageRoot + "/systemd/" + unit, encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin", with: Paths.binDir)
            try text.write(toFile: scratch.path + "/" + unit, atomically: true, encoding: .utf8)
        }
        func run(_ args: [String]) throws -> (Int32, String) { try runProgram(analyze, args, directory: scratch.path) }
        // Templates are verified as instances (cached@blog.service from cached@.service).
        let instances = Self.units.map { $0.replacingOccurrences(of: "@.", with: "@blog.") }
        let (verify, verifyOut) = try run(["verify"] + instances.map { "./" + $0 })
        #expect(verify == 0, "\(verifyOut)")
        #expect(verifyOut.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(verifyOut)")
        for service in ["cached.service", "cached@blog.service"] {
            let (_, security) = try run(["security", "--offline=true", "./" + service])
            let line = security.split(separator: "\n").first { $0.contains("Overall exposure level") } ?? ""
            let score = Double(line.split(separator: ":").last?.split(separator: " ").first ?? "") ?? 99
            #expect(score <= 2.0, "\(service): \(line)")
        }
    }

    /// An instance is hardened exactly as the single daemon is: the lines
    /// from "# Hardening" to the end of [Service] are the same in both units.
    @Test func theTemplateKeepsTheSingleInstancesHardening() throws {
        func hardening(_ unit: String) throws -> [Substring] {
            let lines = try String(contentsOfFile: Paths.packageRoot + "/systemd/" + unit, encoding: .utf8).split(separator: "\n")
            let start = try #require(lines.firstIndex { $0.hasPrefix("# Hardening") }, "\(unit) has no # Hardening block")
            return Array(lines[(start + 1)...].prefix { !$0.hasPrefix("[") })
        }
        let single = try hardening("cached.service")
        #expect(single.count > 20)
        #expect(try hardening("cached@.service") == single)
        let prefetch = try String(contentsOfFile: Paths.packageRoot + "/systemd/cached-prefetch.service", encoding: .utf8)
        let template = try String(contentsOfFile: Paths.packageRoot + "/systemd/cached-prefetch@.service", encoding: .utf8)
        let settings = { (text: String) in text.split(separator: "\n").filter { !$0.hasPrefix("Description=") && !$0.contains("cached.socket")
            && !$0.contains("cached@%i.socket") && !$0.hasPrefix("ExecStart=") && !$0.hasPrefix("Environment=CACHED_SOCKET") } }
        #expect(settings(template) == settings(prefetch), "the prefetch template runs as the single one does")
    }
}


/// The bash completion of cachectl, sourced in a real bash.
@Suite struct CompletionTests {
    static func complete(_ words: [String]) throws -> [String] {
        let script = """
        source '\(Paths.packageRoot)/completions/cachectl.bash'
        COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " ")))
        COMP_CWORD=\(words.count - 1)
        _cachectl
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        return try runProgram("/bin/bash", ["--norc", "-c", script]).output.split(separator: "\n").map(String.init).sorted()
    }

    @Test func completesCommandsSubcommandsAndTargets() throws {
        #expect(try Self.complete(["cachectl", "g"]) == ["gc", "get"])
        #expect(try Self.complete(["cachectl", "get", "im"]) == ["image", "images"])
        #expect(try Self.complete(["cachectl", "--socket", "/tmp/s", "prefetch", ""]) == ["--force", "all", "images", "posts"])
        #expect(try Self.complete(["cachectl", "--json", "me"]) == ["metrics"])
    }
}
