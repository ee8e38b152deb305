import Foundation
import Testing
import CacheProtocol

/// `cachectl --instance NAME`: the socket of cached@NAME.service,
/// /run/cached/NAME.sock (systemd/cached@.socket), with the real binaries.
@Suite struct InstanceTests {
    @Test func anInstanceNameIsItsSocketUnderRunCached() throws {
        let name = "it-\(getpid())-\(UInt32.random(in: 1...UInt32.max))"
        let directory = "/run/cached"
        let made = !FileManager.default.fileExists(atPath: directory)
        defer { if made { try? FileManager.default.removeItem(atPath: directory) } }
        // The harness waits on its own socket; this daemon's is the instance's.
        let daemon = try Daemon(origin: nil, arguments: ["--socket", "\(directory)/\(name).sock"], waitReady: false)
        defer { daemon.stop() }
        let answered = waitUntil(20) { (try? runProgram(Paths.cachectl, ["--instance", name, "ping"]))?.status == 0 }
        #expect(answered, "cachectl --instance \(name) ping: \(daemon.log)")
        let status = try runProgram(Paths.cachectl, ["--json", "--instance=\(name)", "status"])
        #expect(status.output.contains("\"socket\":\"\(directory)/\(name).sock\""), "\(status.output)")
        #expect(try CompletionTests.complete(["cachectl", "--instance", String(name.prefix(3))]).contains(name))
    }

    @Test func aMissingInstanceIsNamedByItsSocket() throws {
        let r = try runProgram(Paths.cachectl, ["--instance", "no-such-instance-\(getpid())", "ping"])
        #expect(r.status == 3, "not running: \(r.output)")
        #expect(r.output.contains("/run/cached/no-such-instance-\(getpid()).sock"), "\(r.output)")
    }

    @Test(arguments: [(["--instance", "", "ping"], "--instance takes the NAME of cached@NAME.service, such as blog, not \"\""),
                      (["--instance", "../etc/x", "ping"], "not \"../etc/x\""), (["--instance", "a/b", "ping"], "not \"a/b\""),
                      (["--instance", ".hidden", "ping"], "not \".hidden\""),
                      (["--instance", String(repeating: "n", count: 91), "ping"], "such as blog"),
                      (["ping", "--instance"], "--instance needs a name"),
                      (["--socket", "/tmp/s", "--instance", "blog", "ping"], "--socket and --instance both name the socket; give one"),
                      (["--instance", "blog", "--socket=/tmp/s", "ping"], "--instance and --socket both name the socket; give one")])
    func badInstancesAreUsageErrors(_ arguments: [String], _ message: String) throws {
        let r = try runProgram(Paths.cachectl, arguments)
        #expect(r.status == 2, "\(arguments): \(r.output)")
        #expect(r.output.hasPrefix("cachectl: ") && r.output.contains(message), "\(r.output)")
    }

    @Test func theLongestNameThatFitsASocketPathIsAccepted() throws {
        let name = String(repeating: "n", count: 90)
        let r = try runProgram(Paths.cachectl, ["--instance", name, "ping"])
        #expect(r.status == 3 && r.output.contains("/run/cached/\(name).sock"), "\(r.output)")
    }
}
