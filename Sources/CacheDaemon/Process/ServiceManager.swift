#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The systemd side: readiness over `$NOTIFY_SOCKET` and inherited sockets
/// through `$LISTEN_FDS`, both by hand (no libsystemd).
struct ServiceManager {
    let environment: [String: String]

    /// Sends `state` (for example `READY=1\nSTATUS=...`) as one datagram; a
    /// leading `@` in the path names an abstract socket. Silent when not under systemd.
    func notify(_ state: String) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        guard bytes.count < 108 else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        let message = Array(state.utf8)
        _ = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
            }
        }
    }

    /// The watchdog interval systemd expects pings within, if it set one for us.
    var watchdogInterval: Duration? {
        guard let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return .microseconds(usec)
    }

    /// Sockets passed by systemd socket activation (fd 3 onwards), if they
    /// are for us, each with its name from `$LISTEN_FDNAMES` (a socket
    /// unit's `FileDescriptorName=`; systemd names an unnamed one after its unit).
    /// Each must be a listening socket: a descriptor that is not (it was
    /// not open, so a file the daemon opened since took its number; the
    /// environment lied) fails the start, as does one that cannot be made
    /// non-blocking: the loop must never block on one.
    func inheritedSockets() throws(SystemError) -> [(fd: FileDescriptor, name: String)] {
        guard let pid = environment["LISTEN_PID"], Int32(pid) == getpid(),
              let countText = environment["LISTEN_FDS"], let count = Int32(countText), count > 0 else { return [] }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        var sockets: [(fd: FileDescriptor, name: String)] = []
        for i in 0..<count {
            let fd = FileDescriptor(rawValue: 3 + i, path: "inherited fd \(3 + i)")
            var listening: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd.rawValue, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 else {
                throw SystemError("getsockopt(SO_ACCEPTCONN)", fd.path)
            }
            guard listening == 1 else { throw SystemError("a socket that does not listen", fd.path, errno: EINVAL) }
            _ = fcntl(fd.rawValue, F_SETFD, FD_CLOEXEC)
            try fd.setNonBlocking()
            sockets.append((fd, Int(i) < names.count ? names[Int(i)] : ""))
        }
        return sockets
    }

    /// The `FileDescriptorName=` of the HTTP socket unit (systemd/cached-http.socket).
    static let httpSocketName = "http"
}
