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
}
