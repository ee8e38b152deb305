#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

@Suite struct UnixSocketTests {
    /// A listener in a fresh directory, one client connected to it and the
    /// server's end of that connection. Closed (and the directory removed) by `close()`.
    private struct Pair {
        let temp = TempDirectory()
        let path: String
        let listener: FileDescriptor
        let client: FileDescriptor
        let server: FileDescriptor

        init() throws {
            path = temp.at("s")
            listener = try UnixSocket.listen(path: path)
            client = try UnixSocket.connect(path: path)
            server = try #require(try UnixSocketTests.acceptWithin(listener, seconds: 10))
        }

        func close() {
            server.close()
            client.close()
            listener.close()
        }
    }

    /// Waits (poll) until `fd` is readable; false after `seconds`.
    private static func readable(_ fd: FileDescriptor, seconds: Double = 10) -> Bool {
        var p = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, Int32(seconds * 1000)) == 1
    }

    private static func acceptWithin(_ listener: FileDescriptor, seconds: Double) throws -> FileDescriptor? {
        guard readable(listener, seconds: seconds) else { return nil }
        return try UnixSocket.accept(listener)
    }

    private static func sendAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws -> Int {
        try bytes.withUnsafeBytes { (raw) throws(SystemError) in try UnixSocket.send(fd, raw) }
    }

    /// Reads exactly `count` bytes from a blocking descriptor (fewer at end of stream).
    private static func receiveExactly(_ fd: FileDescriptor, _ count: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while out.count < count {
            let n = try chunk.withUnsafeMutableBytes { (raw) throws(SystemError) in
                try UnixSocket.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<min(raw.count, count - out.count)]))
            }
            guard let n, n > 0 else { break }
            out += chunk[0..<n]
        }
        return out
    }

    @Test func listenCreatesASocketFileWithTheModeAndANonBlockingListener() throws {
        let temp = TempDirectory()
        let path = temp.at("listener")
        let listener = try UnixSocket.listen(path: path)
        defer { listener.close() }
        #expect(try FileSystem.status(path)?.isSocket == true)
        #expect(permissions(path) == 0o660)
        #expect(fcntl(listener.rawValue, F_GETFL) & O_NONBLOCK == O_NONBLOCK)
        #expect(fcntl(listener.rawValue, F_GETFD) & FD_CLOEXEC == FD_CLOEXEC)
        #expect(listener.path == path)
        let other = try UnixSocket.listen(path: temp.at("private"), mode: 0o600)
        defer { other.close() }
        #expect(permissions(temp.at("private")) == 0o600)
    }

    @Test func acceptWithNothingPendingIsNil() throws {
        let temp = TempDirectory()
        let listener = try UnixSocket.listen(path: temp.at("s"))
        defer { listener.close() }
        #expect(try UnixSocket.accept(listener) == nil)
    }

    @Test func connectAcceptSendAndReceiveBothWays() throws {
        let pair = try Pair()
        defer { pair.close() }
        #expect(fcntl(pair.server.rawValue, F_GETFL) & O_NONBLOCK == O_NONBLOCK)
        #expect(fcntl(pair.server.rawValue, F_GETFD) & FD_CLOEXEC == FD_CLOEXEC)
        #expect(fcntl(pair.client.rawValue, F_GETFD) & FD_CLOEXEC == FD_CLOEXEC)
        #expect(pair.client.path == pair.path)

        let request = Array("GET /posts\n".utf8)
        #expect(try Self.sendAll(pair.client, request) == request.count)
        #expect(Self.readable(pair.server))
        #expect(try Self.receiveExactly(pair.server, request.count) == request)

        let answer = pattern(30_000, seed: 2)
        #expect(try Self.sendAll(pair.server, answer) == answer.count)
        #expect(try Self.receiveExactly(pair.client, answer.count) == answer)
    }

    @Test func receiveWithNothingPendingIsNilAndAtEndOfStreamZero() throws {
        let pair = try Pair()
        defer { pair.server.close(); pair.listener.close() }
        var buffer = [UInt8](repeating: 0, count: 64)
        let nothing = try buffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try UnixSocket.receive(pair.server, into: raw) }
        #expect(nothing == nil)
        pair.client.close()
        #expect(Self.readable(pair.server))
        let end = try buffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try UnixSocket.receive(pair.server, into: raw) }
        #expect(end == 0)
    }

    @Test func sendToAClosedPeerIsEPIPENotASignal() throws {
        let pair = try Pair()
        defer { pair.server.close(); pair.listener.close() }
        pair.client.close()
        #expect(Self.readable(pair.server))
        let error = #expect(throws: SystemError.self) { _ = try Self.sendAll(pair.server, Array("late".utf8)) }
        #expect(error?.call == "send")
        #expect(error?.errno == EPIPE)
        #expect(error?.subject == pair.path)
    }

    @Test func sendReturnsZeroWhenTheSocketWouldBlock() throws {
        let pair = try Pair()
        defer { pair.close() }
        UnixSocket.setSendBuffer(pair.server, bytes: 4096)
        UnixSocket.setReceiveBuffer(pair.client, bytes: 4096)
        let chunk = [UInt8](repeating: 7, count: 65536)
        var total = 0
        var sawZero = false
        for _ in 0..<10_000 {
            let n = try Self.sendAll(pair.server, chunk)
            if n == 0 { sawZero = true; break }
            total += n
        }
        #expect(sawZero)
        #expect(total > 0)
        // What was accepted arrives whole.
        let received = try Self.receiveExactly(pair.client, total)
        #expect(received.count == total)
        #expect(received.allSatisfy { $0 == 7 })
    }

    @Test func peerCredentialsAreOurs() throws {
        let pair = try Pair()
        defer { pair.close() }
        let server = try #require(UnixSocket.peerCredentials(pair.server))
        #expect(server.pid == getpid())
        #expect(server.uid == geteuid())
        #expect(server.gid == getegid())
        let client = try #require(UnixSocket.peerCredentials(pair.client))
        #expect(client.pid == getpid())
        #expect(client.uid == geteuid())
    }

    @Test func peerCredentialsOfAFileAreNil() throws {
        let temp = TempDirectory()
        let fd = try FileDescriptor.open(temp.write("file", "x"), .readOnly)
        defer { fd.close() }
        #expect(UnixSocket.peerCredentials(fd) == nil)
    }

    @Test func sendFileSendsTheFileFromItsOffset() throws {
        let pair = try Pair()
        defer { pair.close() }
        let bytes = pattern(50_000, seed: 4)
        let file = try FileDescriptor.open(pair.temp.write("payload", bytes), .readOnly)
        defer { file.close() }

        var offset: Int64 = 0
        var sent = 0
        while sent < bytes.count {
            let n = try UnixSocket.sendFile(pair.server, from: file, offset: &offset, count: bytes.count - sent)
            if n == 0 { break }  // would block: the client is not reading yet
            sent += n
        }
        #expect(sent == bytes.count)
        #expect(offset == Int64(bytes.count))
        #expect(try Self.receiveExactly(pair.client, bytes.count) == bytes)
        // The file position is not moved by sendfile with an offset.
        #expect(try file.seek(to: 0, whence: SEEK_CUR) == 0)

        offset = 1000
        let n = try UnixSocket.sendFile(pair.server, from: file, offset: &offset, count: 500)
        #expect(n == 500)
        #expect(offset == 1500)
        #expect(try Self.receiveExactly(pair.client, 500) == Array(bytes[1000..<1500]))

        // At the end of the file there is nothing to send.
        offset = Int64(bytes.count)
        #expect(try UnixSocket.sendFile(pair.server, from: file, offset: &offset, count: 10) == 0)
    }

    @Test func sendFileFromANonFileIsAnErrorNamingTheFile() throws {
        let pair = try Pair()
        defer { pair.close() }
        let directory = try FileDescriptor.openDirectory(pair.temp.path)
        defer { directory.close() }
        var offset: Int64 = 0
        let error = #expect(throws: SystemError.self) {
            _ = try UnixSocket.sendFile(pair.server, from: directory, offset: &offset, count: 10)
        }
        #expect(error?.call == "sendfile")
        #expect(error?.subject == pair.temp.path)
        #expect(offset == 0)
    }

    @Test func aPathLongerThanSunPathIsRefusedClearly() throws {
        let temp = TempDirectory()
        let prefix = temp.path + "/"
        let longest = prefix + String(repeating: "s", count: UnixSocket.maxPathLength - prefix.utf8.count)
        let tooLong = longest + "x"
        try #require(longest.utf8.count == 107)

        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: tooLong) }
        #expect(error?.errno == ENAMETOOLONG)
        #expect(error?.subject == tooLong)
        #expect(error?.description.hasPrefix("socket path too long(\(tooLong)): ") == true)
        #expect(temp.names() == [])
        let connectError = #expect(throws: SystemError.self) { try UnixSocket.connect(path: tooLong) }
        #expect(connectError?.errno == ENAMETOOLONG)

        // The longest path that fits works, both ways.
        let listener = try UnixSocket.listen(path: longest)
        defer { listener.close() }
        let client = try UnixSocket.connect(path: longest)
        defer { client.close() }
        let server = try #require(try Self.acceptWithin(listener, seconds: 10))
        defer { server.close() }
        #expect(UnixSocket.peerCredentials(server)?.pid == getpid())
    }

    @Test func connectingWhereNothingListensSaysWhy() throws {
        let temp = TempDirectory()
        let missing = temp.at("missing")
        let error = #expect(throws: SystemError.self) { try UnixSocket.connect(path: missing) }
        #expect(error?.call == "connect")
        #expect(error?.subject == missing)
        #expect(error?.errno == ENOENT)

        let stale = temp.at("stale")
        try UnixSocket.listen(path: stale).close()  // the file stays, nothing answers
        let refused = #expect(throws: SystemError.self) { try UnixSocket.connect(path: stale) }
        #expect(refused?.errno == ECONNREFUSED)
    }

    @Test func aStaleSocketIsReplacedALiveOneIsNot() throws {
        let temp = TempDirectory()
        let path = temp.at("s")
        try UnixSocket.listen(path: path).close()
        #expect(try FileSystem.status(path)?.isSocket == true)
        #expect(throws: SystemError.self) { try UnixSocket.connect(path: path) }

        let listener = try UnixSocket.listen(path: path)
        defer { listener.close() }
        #expect(try FileSystem.status(path)?.isSocket == true)

        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: path) }
        #expect(error?.errno == EADDRINUSE)
        #expect(error?.call == "another daemon is listening on")
        // The live listener still answers.
        let client = try UnixSocket.connect(path: path)
        defer { client.close() }
        #expect(try Self.acceptWithin(listener, seconds: 10) != nil)
    }

    /// Only a refused connection shows a socket file stale: one that fails
    /// otherwise (here a datagram socket, EPROTOTYPE) is not replaced.
    @Test func aSocketThatFailsOtherwiseThanRefusingIsNotReplaced() throws {
        let temp = TempDirectory()
        let path = temp.at("dgram")
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(fd >= 0)
        defer { Glibc.close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: path.utf8)
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        let before = try #require(try FileSystem.status(path))
        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: path) }
        #expect(error?.call == "connect")
        #expect(error?.errno == EPROTOTYPE)
        #expect(try FileSystem.status(path)?.isSameFile(as: before) == true)
    }

    @Test func aFileThatIsNotASocketIsLeftAlone() throws {
        let temp = TempDirectory()
        let path = temp.write("not-a-socket", "precious")
        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: path) }
        #expect(error?.errno == EEXIST)
        #expect(error?.call == "refusing to replace non-socket")
        #expect(error?.subject == path)
        #expect(temp.contents("not-a-socket") == Array("precious".utf8))

        temp.makeDirectory("dir")
        #expect(throws: SystemError.self) { try UnixSocket.listen(path: temp.at("dir")) }
        #expect(try FileSystem.status(temp.at("dir"))?.isDirectory == true)
    }

    @Test func listenInAMissingDirectoryIsABindError() throws {
        let temp = TempDirectory()
        let path = temp.at("missing/s")
        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: path) }
        #expect(error?.call == "bind")
        #expect(error?.errno == ENOENT)
        #expect(error?.subject == path)
    }
}
