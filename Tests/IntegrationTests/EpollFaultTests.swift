import Foundation
import Testing
import Glibc
import CacheProtocol
import CacheSystem

/// A connection the kernel will not watch (`epoll_ctl` failing with
/// `ENOSPC`, as at `fs.epoll.max_user_watches`, or a change of what it
/// watches failing with `ENOMEM`) is closed at once with one log line, and
/// the daemon goes on serving: before, the failure was dropped and the
/// connection hung unwatched. A listener whose pause fails says so and
/// keeps accepting. The fault is made by a preloaded shim
/// (Tests/Fixtures/faults/epoll-refuse.c) while a flag file exists; the
/// daemon, its socket and its clients are the real ones.
@Suite struct EpollFaultTests {
    /// Builds the shim into `scratch`.
    static func shim(_ scratch: Scratch) throws -> String {
        let library = scratch.path + "/epoll-refuse.so"
        let source = Paths.packageRoot + "/Tests/Fixtures/faults/epoll-refuse.c"
        let built = try runProgram("/usr/bin/env", ["cc", "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"])
        guard built.status == 0 else { throw HarnessError("cc failed: \(built.output)") }
        return library
    }

    @Test func aConnectionThatCannotBeWatchedIsClosedAndTheDaemonServesOn() throws {
        let scratch = Scratch()
        let flag = scratch.path + "/refuse"
        let daemon = try Daemon(origin: nil, scratch: scratch,
                                environment: ["LD_PRELOAD": try Self.shim(scratch), "CACHED_TEST_EPOLL_REFUSE": flag])
        #expect(try daemon.call("ping")["ok"]?.bool == true)

        #expect(FileManager.default.createFile(atPath: flag, contents: nil))
        for _ in 0..<3 {
            // Accepted, not watched, closed: the client reads the end (or a
            // reset), not silence until its timeout.
            do {
                let answer = try Client(socketPath: daemon.socket, timeout: .answer(.seconds(10))).call("ping")
                Issue.record("answered while not watched: \(answer)")
            } catch ClientError.timedOut {
                Issue.record("the connection hung unwatched")
            } catch {}
        }
        #expect(waitUntil { daemon.log.contains("cannot be watched for events") })
        let lines = daemon.log.split(separator: "\n").filter { $0.contains("cannot be watched for events") }
        #expect(lines.count == 1, "one line, the rest throttled: \(lines)")
        #expect(lines.first?.contains("ENOSPC") == true || lines.first?.contains("No space left") == true, "\(lines)")

        try FileManager.default.removeItem(atPath: flag)
        #expect(try daemon.call("ping")["ok"]?.bool == true)
        let status = try daemon.call("status")
        #expect(daemon.isRunning, "\(status)")
        #expect(daemon.stop() == 0)
    }

    /// A connection whose answers back up (a client that sends and never
    /// reads) must be watched for EPOLLOUT: when that change fails, the
    /// connection is closed saying so, and other clients are served.
    @Test func aConnectionWhoseWatchCannotChangeIsClosed() throws {
        let scratch = Scratch()
        let flag = scratch.path + "/refuse"
        let daemon = try Daemon(origin: nil, scratch: scratch,
                                environment: ["LD_PRELOAD": try Self.shim(scratch), "CACHED_TEST_EPOLL_REFUSE": flag,
                                              "CACHED_TEST_EPOLL_REFUSE_OP": "MOD"])
        #expect(FileManager.default.createFile(atPath: flag, contents: nil))
        let hog = try UnixSocket.connect(path: daemon.socket)
        defer { hog.close() }
        try hog.setNonBlocking()
        let line = Request.line(op: "ping")
        let deadline = Date().addingTimeInterval(10)
        // Pings until the daemon stops taking them (it closed the connection) or 10 s pass.
        var closed = false
        while !closed && Date() < deadline {
            do throws(SystemError) {
                let n = try line.withBytes { (raw) throws(SystemError) in try UnixSocket.send(hog, raw) }
                if n == 0 { usleep(1000) }
            } catch { closed = error.errno != EAGAIN; if !closed { usleep(1000) } }
        }
        #expect(closed, "the connection was never closed")
        #expect(waitUntil { daemon.log.contains("cannot be watched for events: epoll_ctl(EPOLL_CTL_MOD)") }, "\(daemon.log.suffix(1500))")
        #expect(try daemon.call("ping")["ok"]?.bool == true, "a client that reads is served")
        try FileManager.default.removeItem(atPath: flag)
        #expect(daemon.stop() == 0)
    }

    /// Out of descriptors, `accept` fails and the listener is paused until
    /// the next tick; when even the pause fails, the daemon says so, tells
    /// the waiting clients `busy` as before, and serves once they leave.
    @Test func aListenerWhosePauseFailsSaysSoAndServesOn() throws {
        let scratch = Scratch()
        let flag = scratch.path + "/refuse"
        let daemon = try Daemon(origin: nil, scratch: scratch,
                                environment: ["LD_PRELOAD": try Self.shim(scratch), "CACHED_TEST_EPOLL_REFUSE": flag,
                                              "CACHED_TEST_EPOLL_REFUSE_OP": "MOD"],
                                launcher: ["/usr/bin/prlimit", "--nofile=64:64", "--"])
        #expect(FileManager.default.createFile(atPath: flag, contents: nil))
        var held: [FileDescriptor] = []
        defer { for fd in held { fd.close() } }
        for _ in 0..<104 { held.append(try UnixSocket.connect(path: daemon.socket)) }
        #expect(waitUntil { daemon.log.contains("cannot pause listener 0's events") }, "\(daemon.log.suffix(1500))")
        #expect(daemon.log.contains("epoll_ctl(EPOLL_CTL_MOD)"))
        // Some of those past the limit were told busy, as when the pause works.
        var told = 0
        for fd in held {
            try fd.setNonBlocking()
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) }
            if n > 0, String(decoding: buffer[..<n], as: UTF8.self).contains("\"busy\"") { told += 1 }
        }
        #expect(told > 0, "none of the \(held.count) connections was told busy")
        for fd in held { fd.close() }
        held = []
        try FileManager.default.removeItem(atPath: flag)
        #expect(waitUntil(10) { (try? daemon.call("ping"))?["ok"]?.bool == true }, "served once they left")
        #expect(daemon.stop() == 0)
    }
}
