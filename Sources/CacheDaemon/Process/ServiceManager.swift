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
    var watchdogInterval: UInt64? {
        guard let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return usec * 1000
    }

    /// Sockets passed by systemd socket activation (fd 3 onwards), if they
    /// are for us, each with its name from `$LISTEN_FDNAMES` (a socket
    /// unit's `FileDescriptorName=`; systemd names an unnamed one after its unit).
    func inheritedSockets() -> [(fd: FileDescriptor, name: String)] {
        guard let pid = environment["LISTEN_PID"], Int32(pid) == getpid(),
              let countText = environment["LISTEN_FDS"], let count = Int32(countText), count > 0 else { return [] }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        return (0..<count).map { i in
            let fd = FileDescriptor(rawValue: 3 + i, path: "inherited fd \(3 + i)")
            _ = fcntl(fd.rawValue, F_SETFD, FD_CLOEXEC)
            try? fd.setNonBlocking()
            return (fd, Int(i) < names.count ? names[Int(i)] : "")
        }
    }

    /// The `FileDescriptorName=` of the HTTP socket unit (systemd/cached-http.socket).
    static let httpSocketName = "http"
}
