import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// The units' `SystemCallFilter` against what the daemon and its variant
/// helpers really call: the daemon runs under `strace -f` through a prefetch,
/// HTTP and a variant (a helper started, sandboxed, given a job), and every
/// system call any of its processes made must be one the unit allows, or
/// systemd would kill the process that made it (a helper's `seccomp`, the
/// daemon's `prlimit64`). The filter is expanded as systemd reads it, with
/// `systemd-analyze syscall-filter` naming each group's calls.
@Suite struct UnitSyscallFilterTests {
    /// The calls of `name` (a group `@x` or a call), groups within it expanded.
    static func expand(_ name: String, _ cache: inout [String: Set<String>]) throws -> Set<String> {
        guard name.hasPrefix("@") else { return [name] }
        if let known = cache[name] { return known }
        let (status, output) = try runProgram("/usr/bin/systemd-analyze", ["syscall-filter", name])
        guard status == 0 else { throw HarnessError("systemd-analyze syscall-filter \(name): \(output)") }
        var calls = Set<String>()
        for line in output.split(separator: "\n").dropFirst() {
            let word = line.trimmingCharacters(in: .whitespaces)
            if word.isEmpty || word.hasPrefix("#") { continue }
            calls.formUnion(try expand(word, &cache))
        }
        cache[name] = calls
        return calls
    }

    /// The calls a unit's `SystemCallFilter=` lines allow: the first is the
    /// allow-list (it has no `~`), then each `~` line takes calls away and
    /// each other line gives calls back, in order.
    static func allowed(unit path: String) throws -> Set<String> {
        var cache: [String: Set<String>] = [:]
        var allowed = Set<String>()
        var first = true
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") where line.hasPrefix("SystemCallFilter=") {
            var value = String(line.dropFirst("SystemCallFilter=".count))
            let deny = value.hasPrefix("~")
            if deny { value.removeFirst() }
            var calls = Set<String>()
            for word in value.split(separator: " ") { calls.formUnion(try expand(String(word), &cache)) }
            if deny { allowed.subtract(calls) } else { allowed.formUnion(calls) }
            if first && deny { throw HarnessError("\(path): a first deny-list is not what this test reads") }
            first = false
        }
        return allowed
    }

    /// The system calls named in an `strace -f` output file.
    static func traced(_ path: String) throws -> Set<String> {
        var calls = Set<String>()
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            // "1234  name(args) = ..." or "1234  <... name resumed>..."
            let fields = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard fields.count == 2 else { continue }
            var rest = fields[1].drop { $0 == " " }
            if rest.hasPrefix("<... ") { rest = rest.dropFirst(5) }
            let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            if !name.isEmpty, rest.dropFirst(name.count).first == "(" || rest.dropFirst(name.count).hasPrefix(" resumed") {
                calls.insert(String(name))
            }
        }
        return calls
    }

    @Test(arguments: ["cached.service", "cached@.service"])
    func theUnitAllowsEveryCallTheDaemonAndItsHelpersMake(_ unit: String) throws {
        try requireInstalled("/usr/bin/strace", package: "strace")
        try requireInstalled("/usr/bin/systemd-analyze", package: "systemd")
        let allowed = try Self.allowed(unit: Paths.packageRoot + "/systemd/" + unit)
        #expect(allowed.contains("read") && !allowed.contains("reboot") && !allowed.contains("setrlimit"), "\(unit): the filter read as systemd does")

        let nginx = try Nginx()
        let scratch = Scratch()
        let trace = scratch.path + "/trace"
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                          "--http-listen", "127.0.0.1:\(port)"],
                                scratch: scratch, launcher: ["/usr/bin/strace", "-f", "-qq", "-o", trace])
        #expect(try daemon.call("prefetch")["ok"] == .bool(true))
        let made = try daemon.call("get_image", [("row", num(3)), ("variant", .object([("w", num(40)), ("format", .string("avif"))]))])
        #expect(made["image"]?["variant"]?["width"]?.int == 40, "\(made)")
        #expect(SimpleHTTPStatus.get(port: port, path: "/images/4?w=32") == 200)
        _ = try daemon.call("verify")
        _ = try daemon.call("gc")
        // strace is the launcher's process: the daemon is its child, stopped as systemd stops it.
        let (_, children) = try runProgram("/usr/bin/pgrep", ["-P", String(daemon.pid), "-x", "cached"])
        let pid = try #require(Int32(children.split(separator: "\n").first ?? ""), "the daemon under strace")
        kill(pid, SIGTERM)
        #expect(daemon.stop() == 0)

        let calls = try Self.traced(trace)
        #expect(calls.contains("seccomp") && calls.contains("prlimit64") && calls.contains("execve"), "the trace holds the helper's start: \(calls.sorted())")
        let refused = calls.subtracting(allowed).sorted()
        #expect(refused.isEmpty, "\(unit) would kill a process for: \(refused)")
    }
}

/// The status of one HTTP GET (HTTP/1.0 over TCP), or 0.
enum SimpleHTTPStatus {
    static func get(port: Int, path: String) -> Int {
        guard let answer = try? SimpleHTTP.get(port: port, path: path) else { return 0 }
        return answer.status
    }
}
