import Foundation
import Testing
import CacheSystem
@testable import CacheProtocol

/// A fresh directory under /tmp that only root can enter, removed at the end.
private final class TempDirectory {
    let path: String
    init() {
        var template = Array("/tmp/cached-pt-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// `Client` timeouts against sockets that listen and never answer.
@Suite struct ClientTimeoutTests {
    /// A listening socket nobody accepts on; closed and removed in `close`.
    private static func silentListener(_ path: String, backlog: Int32 = 16) throws -> FileDescriptor {
        try UnixSocket.listen(path: path, backlog: backlog)
    }

    @Test func noTimeoutByDefault() throws {
        let temp = TempDirectory()
        let listener = try Self.silentListener(temp.path + "/s.sock")
        defer { listener.close() }
        let client = try Client(socketPath: temp.path + "/s.sock")
        #expect(client.timeout == .none)
    }

    @Test(arguments: [ClientTimeout.answer(seconds: 0.3), .whileAlive(seconds: 0.3)])
    func aSilentListenerTimesOut(_ timeout: ClientTimeout) throws {
        let temp = TempDirectory()
        let path = temp.path + "/s.sock"
        let listener = try Self.silentListener(path)
        defer { listener.close() }
        let client = try Client(socketPath: path, timeout: timeout)
        let start = Date()
        #expect {
            _ = try client.call("ping")
        } throws: { error in
            guard let e = error as? ClientError, case .timedOut(let socket, let seconds) = e else { return false }
            return socket == path && seconds == 0.3
        }
        #expect(Date().timeIntervalSince(start) < 30)
    }

    @Test func aFullBacklogTimesOutInConnect() throws {
        let temp = TempDirectory()
        let path = temp.path + "/s.sock"
        let listener = try Self.silentListener(path, backlog: 0)
        defer { listener.close() }
        var queued: [Client] = []
        // Clients with a timeout, until one cannot connect.
        var failure: ClientError?
        while failure == nil && queued.count < 1000 {
            do { queued.append(try Client(socketPath: path, timeout: .answer(seconds: 0.2))) } catch { failure = error }
        }
        #expect(!queued.isEmpty)
        guard case .timedOut(path, 0.2)? = failure else {
            Issue.record("expected a timeout in connect, got \(String(describing: failure))")
            return
        }
        #expect(failure?.description == "no answer from cached at \(path) within 0.2 s (is it stopped? check systemctl status cached)")
    }
}
