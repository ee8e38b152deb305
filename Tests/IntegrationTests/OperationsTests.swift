import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// cachectl, the store lock, the socket, signals and crashes.
@Suite struct OperationsTests {
    @Test func cachectlVerbsPrintTextAndJSONWithMeaningfulExitCodes() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket

        var r = try cachectl(["ping"], socket: s)
        #expect(r.status == 0)
        #expect(r.stdout.contains("protocol 1"))

        r = try cachectl(["get", "post", "1"], socket: s)
        #expect(r.status == 4, "not fetched yet")
        #expect(r.stderr.contains("not found"))

        r = try cachectl(["prefetch"], socket: s)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("100 fetched"))
        #expect(r.stdout.contains("16 downloaded"))
        #expect(!r.stderr.contains("\r"), "no progress bar when stderr is not a terminal")

        r = try cachectl(["get", "post", "3"], socket: s)
        #expect(r.status == 0)
        #expect(r.stdout.contains("Post 3 by user 1"))

        r = try cachectl(["--json", "get", "post", "3"], socket: s)
        let answer = try JSONParser.parse(Array(r.stdout.utf8))
        #expect(answer["post"]?["id"]?.int == 3)

        r = try cachectl(["get", "posts"], socket: s)
        #expect(r.stdout.split(separator: "\n").count == 102)

        r = try cachectl(["get", "images"], socket: s)
        #expect(r.stdout.contains("16/16 rows cached"))

        r = try cachectl(["get", "image", "13"], socket: s)
        #expect(r.stdout.contains("image/jpeg"))

        let out = daemon.scratch.path + "/out.jpg"
        r = try cachectl(["get", "image", "13", "-o", out], socket: s)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == (try origin.read("images/14-fractal.jpg")))

        r = try cachectl(["get", "image", "2", "-o", "-"], socket: s)
        #expect(Array(r.stdout.utf8).count > 0)

        for verb in ["status", "verify", "gc", "compact"] {
            r = try cachectl([verb], socket: s)
            #expect(r.status == 0, "\(verb): \(r.stderr)")
            r = try cachectl(["--json", verb], socket: s)
            #expect(try JSONParser.parse(Array(r.stdout.utf8))["ok"] == .bool(true), "\(verb)")
        }

        r = try cachectl(["metrics"], socket: s)
        #expect(r.status == 0)
        #expect(r.stdout.contains("# TYPE cached_requests_total counter"))
        #expect(r.stdout.contains("\ncached_posts 100\n"))
        #expect(r.stdout.contains("\ncached_images_cached 16\n"))
        #expect(r.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("#") || $0.split(separator: " ").count == 2 }, "\(r.stdout)")

        r = try cachectl(["get", "post", "424242"], socket: s)
        #expect(r.status == 4)
        #expect(r.stderr.split(separator: "\n").count == 1)
        r = try cachectl(["get", "image", "999"], socket: s)
        #expect(r.status == 4)
        r = try cachectl(["frobnicate"], socket: s)
        #expect(r.status == 2)
        r = try cachectl(["get", "post", "abc"], socket: s)
        #expect(r.status == 4, "a string id, not found")
        r = try cachectl(["get", "post", ""], socket: s)
        #expect(r.status == 2)
        r = try cachectl(["get", "post", "0042"], socket: s)
        #expect(r.status == 4, "a string that is no integer's spelling does not find post 42")
        r = try cachectl(["get", "post", "42"], socket: s)
        #expect(r.status == 0 && r.stdout.hasPrefix("Post 42 by user"), "\(r.stdout)")
    }

    @Test func cachectlSaysWhenTheDaemonIsNotRunning() throws {
        let scratch = Scratch()
        let r = try cachectl(["status"], socket: scratch.path + "/nothing.sock")
        #expect(r.status == 3)
        #expect(r.stderr.contains(scratch.path + "/nothing.sock"))
        #expect(r.stderr.contains("running"))
    }

    @Test func aPartialPrefetchExitsNonZero() throws {
        let origin = try Origin()
        var manifest = try JSONParser.parse(origin.read("images/manifest.json")).array ?? []
        manifest.append(.object([("url", .string("gone.png"))]))
        try origin.write("images/manifest.json", bytes: JSON.array(manifest).encoded)
        let daemon = try Daemon(origin: origin)
        let r = try cachectl(["prefetch", "images"], socket: daemon.socket)
        #expect(r.status == 5)
        #expect(r.stdout.contains("gone.png"))
        #expect(r.stderr.contains("1 image failed"))
    }

    @Test func aSecondDaemonOnTheSameStoreExitsNamingTheFirst() throws {
        let first = try Daemon(origin: nil)
        let second = try Daemon(origin: nil, arguments: ["--socket", first.scratch.path + "/other.sock"], scratch: first.scratch, waitReady: false)
        #expect(second.waitForExit() != 0)
        #expect(second.log.contains("in use by process \(first.pid)"), "\(second.log)")
        #expect(try first.call("ping")["ok"] == .bool(true))
    }

    @Test func aConfigFileIsCheckedAndUsed() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let conf = scratch.path + "/cached.conf"
        try "# test\nposts-url = \(origin.postsURL)\nimages-url = \(origin.manifestURL)\nconcurrency = 3\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let check = Process()
        check.executableURL = URL(fileURLWithPath: Paths.cached)
        check.arguments = ["--config", conf, "--check-config"]
        let out = Pipe()
        check.standardOutput = out
        try check.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        check.waitUntilExit()
        #expect(check.terminationStatus == 0)
        #expect(text.contains("configuration OK (\(conf))"), "\(text)")
        // The daemon takes its URLs from the file.
        let daemon = try Daemon(origin: nil, arguments: ["--config", conf], scratch: scratch)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["posts"]?["fetched"]?.int == 100)
        // A bad file stops the daemon with file:line.
        try "posts-url = \(origin.postsURL)\nmax-size = plenty\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let bad = try Daemon(origin: nil, arguments: ["--config", conf, "--socket", scratch.path + "/other.sock"], scratch: Scratch(), waitReady: false)
        #expect(bad.waitForExit() == 2)
        #expect(bad.log.contains("\(conf):2: max-size must be a size"), "\(bad.log)")
    }

    @Test func sighupReloadsTheConfigFileOrKeepsTheRunningOne() throws {
        let origin = try Origin()
        try origin.write("other-posts.json", bytes: try origin.read("posts.json"))
        let scratch = Scratch()
        let conf = scratch.path + "/cached.conf"
        try "posts-url = \(origin.postsURL)\nlog-level = info\nidle-timeout = 300\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let daemon = try Daemon(origin: nil, arguments: ["--config", conf, "--log-level", "info"], scratch: scratch)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])

        // A good file: the new URL is used (without the old URL's validators).
        try "posts-url = \(origin.base)/other-posts.json\nidle-timeout = 60\nmax-size = 1G\n".write(toFile: conf, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("SIGHUP: reloaded \(conf)") }, "\(daemon.log)")
        #expect(daemon.log.contains("posts-url \(origin.postsURL) -> \(origin.base)/other-posts.json"))
        #expect(daemon.log.contains("idle-timeout 300.0 -> 60.0"))
        #expect(daemon.log.contains("needs a restart to change: max-size"))
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["posts"]?["unchanged"]?.int == 100, "\(r)")
        let other = try origin.requests().filter { $0.path == "/other-posts.json" }
        #expect(other.count == 1)
        #expect(other.first?.ifModifiedSince == nil, "no validators for a new URL")

        // A bad file: rejected, the running configuration stays.
        try "posts-url = ftp://nowhere/\n".write(toFile: conf, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("configuration not reloaded") }, "\(daemon.log)")
        #expect(daemon.log.contains("\(conf):1: posts-url must be an http"))
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(try origin.requests().filter { $0.path == "/other-posts.json" }.count == 2, "still the reloaded URL")
        #expect(daemon.isRunning)
    }

    @Test func peerCredentialsAreLoggedAtDebugLevel() throws {
        let daemon = try Daemon(origin: nil)  // the harness runs it with --log-level debug
        _ = try daemon.call("ping")
        #expect(waitUntil(5) { daemon.log.contains("from pid \(getpid()) uid \(getuid()) gid \(getgid())") }, "\(daemon.log)")
    }

    @Test func sigintStopsLikeSigterm() throws {
        let daemon = try Daemon(origin: nil)
        kill(daemon.pid, SIGINT)
        #expect(daemon.waitForExit() == 0)
        #expect(daemon.log.contains("received signal 2, stopping"))
        #expect(!FileManager.default.fileExists(atPath: daemon.socket))
    }

    @Test func theSocketIsOwnerAndGroupOnlyAndRemovedOnStop() throws {
        let daemon = try Daemon(origin: nil)
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.socket)
        #expect((attributes[.posixPermissions] as? Int) == 0o660)
        #expect(daemon.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socket))
    }

    @Test func sigtermDuringAPrefetchExitsCleanlyAndLeavesNoPartialFiles() throws {
        let origin = try Origin(delay: 0.3)
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, scratch: scratch)
        let c = try daemon.client()
        try c.send(Request.line(op: "prefetch"))
        usleep(700_000)
        #expect(daemon.stop() == 0)
        daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
    }

    @Test func killNineAtRandomMomentsOfAPrefetchLeavesAStoreThatOpensAndServes() throws {
        let origin = try Origin(delay: 0.02)
        let scratch = Scratch()
        var cachedRows: Set<Int> = []
        for round in 0..<8 {
            let daemon = try Daemon(origin: origin, scratch: scratch)
            // Everything reported cached before the crash is still cached after it.
            for row in cachedRows {
                let r = try daemon.call("get_image", [("row", num(row)), ("fetch", .bool(false))])
                #expect(r["ok"] == .bool(true), "round \(round), row \(row): \(r)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
            for hex in try daemon.objectFiles() {
                let path = daemon.store + "/objects/" + hex.prefix(2) + "/" + hex.dropFirst(2)
                #expect(Hash128Hex.of(path) == hex, "object \(hex) does not match its name")
            }
            let c = try daemon.client()
            try c.send(Request.line(op: "prefetch", [("force", .bool(round % 2 == 1))]))
            usleep(useconds_t.random(in: 5_000...250_000))
            for row in 0..<16 {
                if let r = try? daemon.call("get_image", [("row", num(row)), ("fetch", .bool(false))]), r["ok"] == .bool(true) {
                    cachedRows.insert(row)
                }
            }
            daemon.kill9()
        }
        let daemon = try Daemon(origin: origin, scratch: scratch)
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(true))
        #expect(try daemon.call("status")["images_cached"]?.int == 16)
    }
}

import CacheStore

/// The XXH3-128 of a file, as hex.
enum Hash128Hex {
    static func of(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return Hash128(of: Array(data)).hex
    }
}
