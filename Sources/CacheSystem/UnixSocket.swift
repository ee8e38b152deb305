#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Unix stream sockets: listen, accept, connect, send and receive with typed errors.
public enum UnixSocket {
    /// The longest path `sun_path` can hold.
    public static let maxPathLength = 107

    private static func address(_ path: String) throws(SystemError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathLength else {
            throw SystemError("socket path too long", path, errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    /// Binds and listens on `path` with `mode`. An existing socket file is
    /// replaced only when a connection to it is refused (nothing listens);
    /// any other kind of file, and a socket that answers or fails otherwise
    /// (another user's, one of another type), is left alone and reported.
    public static func listen(path: String, mode: mode_t = 0o660, backlog: Int32 = 1024) throws(SystemError) -> FileDescriptor {
        if let st = try FileSystem.status(path) {
            guard st.isSocket else { throw SystemError("refusing to replace non-socket", path, errno: EEXIST) }
            if try answers(path) { throw SystemError("another daemon is listening on", path, errno: EADDRINUSE) }
            try FileSystem.unlink(path)
        }
        let fd = try retryingOnInterrupt("socket", path) { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        let sock = FileDescriptor(rawValue: fd, path: path)
        do throws(SystemError) {
            var addr = try address(path)
            // umask-proof: bind creates the file, chmod then sets the exact mode.
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc != 0 { throw SystemError("bind", path) }
            if chmod(path, mode) != 0 { throw SystemError("chmod", path) }
            if Glibc.listen(fd, backlog) != 0 { throw SystemError("listen", path) }
            try sock.setNonBlocking()
        } catch {
            sock.close()
            throw error
        }
        return sock
    }

    /// True when a connection to `path` is accepted; false when it is
    /// refused (a stale file: nothing listens) or the file went away. Any
    /// other failure is thrown: the file is not known to be stale.
    private static func answers(_ path: String) throws(SystemError) -> Bool {
        do throws(SystemError) { try connect(path: path).close() } catch {
            if error.errno == ECONNREFUSED || error.errno == ENOENT { return false }
            throw error
        }
        return true
    }

    /// Connects to the socket at `path` (blocking).
    public static func connect(path: String) throws(SystemError) -> FileDescriptor {
        let fd = try retryingOnInterrupt("socket", path) { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var addr: sockaddr_un
        do { addr = try address(path) } catch { Glibc.close(fd); throw error }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let err = SystemError("connect", path)
            Glibc.close(fd)
            throw err
        }
        return FileDescriptor(rawValue: fd, path: path)
    }

    /// Accepts one connection, non-blocking and close-on-exec; nil when none is waiting.
    public static func accept(_ listener: FileDescriptor) throws(SystemError) -> FileDescriptor? {
        // A connection aborted before it was accepted is skipped, not an error.
        while true {
            let fd = try retryingOnInterrupt("accept4", listener.path, nilOn: EAGAIN, or: ECONNABORTED) {
                accept4(listener.rawValue, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
            if let fd { return FileDescriptor(rawValue: fd, path: listener.path) }
            if errno == EAGAIN { return nil }
        }
    }

    /// Sends without raising SIGPIPE; returns the bytes sent, 0 when the socket would block.
    public static func send(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try retryingOnInterrupt("send", fd.path, nilOn: EAGAIN) {
            Glibc.send(fd.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        } ?? 0
    }

    /// Receives into `buffer`; nil when it would block, 0 at end of stream.
    public static func receive(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try retryingOnInterrupt("recv", fd.path, nilOn: EAGAIN) { recv(fd.rawValue, buffer.baseAddress, buffer.count, 0) }
    }

    /// Sends `bytes` with `descriptors` attached (SCM_RIGHTS, 1 to
    /// `maxPassedDescriptors`): the receiver gets its own descriptor for
    /// each open file, all of them with the first byte sent. Returns the
    /// bytes sent (the descriptors went with them), 0 when the socket would
    /// block (nothing went, the descriptors neither). `ETOOMANYREFS` means
    /// the sender has too many descriptors in flight (more than its
    /// RLIMIT_NOFILE sent and not yet received).
    public static func send(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, passing descriptors: [FileDescriptor]) throws(SystemError) -> Int {
        let raw = descriptors.map(\.rawValue)
        return try raw.withUnsafeBufferPointer { fds throws(SystemError) in
            try retryingOnInterrupt("sendmsg", fd.path, nilOn: EAGAIN) {
                clinux_send_with_fds(fd.rawValue, bytes.baseAddress, UInt(bytes.count), fds.baseAddress, Int32(fds.count))
            } ?? 0
        }
    }

    /// The most descriptors one message passes or one receive takes (a
    /// batch `open`'s, docs/protocol.md "Limits").
    public static let maxPassedDescriptors = Int(CLINUX_MAX_PASSED_FDS)

    /// What one `receive(_:into:descriptors:)` got.
    public struct Received: Sendable {
        /// Bytes received: nil when it would block, 0 at end of stream.
        public var count: Int?
        /// Descriptors that came with them (SCM_RIGHTS, close-on-exec), in order.
        public var descriptors: [FileDescriptor]
        /// The kernel dropped descriptors that did not fit (MSG_CTRUNC), or
        /// more came than were asked for (those are closed).
        public var truncated: Bool
    }

    /// Receives into `buffer` with `recvmsg`, taking up to `maxDescriptors`
    /// (at most `maxPassedDescriptors`) descriptors passed with the bytes
    /// (close-on-exec). One receive takes the descriptors of at most one
    /// message: the kernel ends it after the bytes they came with.
    public static func receive(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer,
                               maxDescriptors: Int) throws(SystemError) -> Received {
        var raw = [Int32](repeating: -1, count: maxPassedDescriptors)
        var count: Int32 = 0
        var truncated: Int32 = 0
        let n = try raw.withUnsafeMutableBufferPointer { fds throws(SystemError) in
            try retryingOnInterrupt("recvmsg", fd.path, nilOn: EAGAIN) {
                clinux_recv_with_fds(fd.rawValue, buffer.baseAddress, UInt(buffer.count), fds.baseAddress, Int32(min(maxDescriptors, maxPassedDescriptors)), &count, &truncated)
            }
        }
        return Received(count: n, descriptors: raw[0..<Int(count)].map { FileDescriptor(rawValue: $0, path: "descriptor from \(fd.path)") },
                        truncated: truncated != 0)
    }

    /// Copies up to `count` bytes of `file` from `offset` to the socket; 0 when it would block.
    public static func sendFile(_ socket: FileDescriptor, from file: FileDescriptor, offset: inout Int64, count: Int) throws(SystemError) -> Int {
        var off = off_t(offset)
        let n = try retryingOnInterrupt("sendfile", file.path, nilOn: EAGAIN) { sendfile(socket.rawValue, file.rawValue, &off, count) }
        offset = Int64(off)
        return n ?? 0
    }

    /// Asks for a larger send buffer (the kernel caps it at net.core.wmem_max).
    public static func setSendBuffer(_ fd: FileDescriptor, bytes: Int32) {
        var size = bytes
        _ = setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Asks for a larger receive buffer (capped at net.core.rmem_max).
    public static func setReceiveBuffer(_ fd: FileDescriptor, bytes: Int32) {
        var size = bytes
        _ = setsockopt(fd.rawValue, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// The connected peer's pid, uid and gid.
    public static func peerCredentials(_ fd: FileDescriptor) -> (pid: Int32, uid: UInt32, gid: UInt32)? {
        var cred = clinux_ucred()
        guard clinux_peercred(fd.rawValue, &cred) == 0 else { return nil }
        return (cred.pid, cred.uid, cred.gid)
    }
}
