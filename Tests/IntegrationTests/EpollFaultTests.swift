import Foundation
import Testing
import Glibc
import CacheProtocol

/// A connection the kernel will not watch (`epoll_ctl` failing with
/// `ENOSPC`, as at `fs.epoll.max_user_watches`) is closed at once with one
/// log line, and the daemon goes on serving: before, the failure was
/// dropped and the connection hung unwatched. The fault is made by a
/// preloaded shim (Tests/Fixtures/faults/epoll-refuse.c) while a flag file
/// exists; the daemon, its socket and its clients are the real ones.
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
}
