#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheProtocol
import CacheSystem

/// The listening sockets the loop serves: the JSON-lines socket and the
/// HTTP front-end's, systemd's or our own.
struct ListenerSet {
    var listeners: [Listener] = []
    /// Socket files this process created, removed when it stops.
    var ownPaths: [String] = []
    /// The JSON-lines socket's path; nil when systemd passed it.
    var socketPath: String?
    /// Where HTTP is served, for the log.
    var http: [String] = []

    /// Closes the listeners and removes the socket files this process made.
    func closeAll(_ log: Logger) {
        for l in listeners { l.fd.close() }
        removeOwnPaths(log)
    }

    /// Removes the socket files this process made; one already gone is
    /// fine, one that cannot be removed is logged (the next start replaces
    /// it only if nothing answers on it: `listenUnix`).
    func removeOwnPaths(_ log: Logger) {
        for p in ownPaths {
            do throws(SystemError) { try FileSystem.unlink(p) } catch where error.errno != ENOENT {
                log.warning("cannot remove the socket \(p): \(error)")
            } catch {}
        }
    }
}

extension Daemon {
    /// Systemd's sockets (an `http`-named one is the HTTP front-end's), or
    /// our own at `socket` and `http-listen`. Nil after logging why not.
    func openListeners(_ manager: ServiceManager) -> ListenerSet? {
        var set = ListenerSet()
        let inherited: [(fd: FileDescriptor, name: String)]
        do throws(SystemError) { inherited = try manager.inheritedSockets() } catch {
            log.error("a socket systemd passed cannot be used: \(error)")
            return nil
        }
        let inheritedHTTP = inherited.filter { $0.name == ServiceManager.httpSocketName }
        let inheritedLines = inherited.filter { $0.name != ServiceManager.httpSocketName }
        if inheritedLines.isEmpty {
            guard let fd = listenUnix(settings.socket) else { return nil }
            set.listeners.append(Listener(fd: fd, framing: .jsonLines))
            set.ownPaths.append(settings.socket)
            set.socketPath = settings.socket
        } else {
            set.listeners += inheritedLines.map { Listener(fd: $0.fd, framing: .jsonLines) }
        }
        if !inheritedHTTP.isEmpty {
            set.listeners += inheritedHTTP.map { Listener(fd: $0.fd, framing: .http, tcp: Self.isTCP($0.fd)) }
            for s in inheritedHTTP where clinux_socket_is_loopback(s.fd.rawValue) == 0 {
                log.warning("systemd passed an HTTP socket on an address that is not loopback: anyone who can reach it can read every post and image (docs/http.md, \"Listening\")")
            }
            set.http = ["the socket systemd passed"]
            if !settings.httpListen.isEmpty {
                log.notice("http-listen is not used: systemd passed the HTTP socket (cached-http.socket)")
            }
            return set
        }
        for address in settings.httpListen {
            guard let listener = listenHTTP(address) else {
                set.closeAll(log)
                return nil
            }
            set.listeners.append(listener)
            if case .unix(let path) = address { set.ownPaths.append(path) }
            set.http.append(address.description)
        }
        return set
    }

    private func listenHTTP(_ address: HTTPAddress) -> Listener? {
        switch address {
        case .unix(let path):
            return listenUnix(path).map { Listener(fd: $0, framing: .http) }
        case let .tcp(host, port, ipv6):
            let fd = clinux_tcp_listen(host, Int32(port), ipv6 ? 1 : 0, 1024)
            guard fd >= 0 else {
                log.error("cannot serve HTTP on \(address): \(SystemError("bind", address.description))")
                return nil
            }
            if !address.isLoopback {
                log.warning("serving HTTP on \(address), which is not a loopback address: anyone who can reach it can read every post and image (docs/http.md, \"Listening\")")
            }
            return Listener(fd: FileDescriptor(rawValue: fd, path: address.description), framing: .http, tcp: true)
        }
    }

    /// A socket of ours at `path`, in a directory no other user can change.
    func listenUnix(_ path: String) -> FileDescriptor? {
        let socketDirectory = FileSystem.directoryName(of: path)
        do {
            try FileSystem.makeDirectories(socketDirectory, mode: 0o755)
        } catch {
            log.error("cannot listen on \(path): \(error)")
            return nil
        }
        // Another user who owns or can write the socket's directory could
        // replace the socket after the bind and answer clients in our name.
        // The per-user default (/tmp/cached-<uid>) must be this user's own.
        let isPrivateDefault = socketDirectory == DefaultPaths.privateTempDirectory
        if let problem = TrustedDirectory.problem(socketDirectory, allowRoot: !isPrivateDefault, allowSticky: !isPrivateDefault, followLink: !isPrivateDefault)
            ?? TrustedDirectory.ancestorsProblem(of: socketDirectory).map({ "a directory above the socket: \($0)" }) {
            log.error("refusing to listen on \(path): \(problem)")
            return nil
        }
        do {
            return try UnixSocket.listen(path: path, mode: Self.socketMode)
        } catch {
            log.error("cannot listen on \(path): \(error)")
            return nil
        }
    }

    static func isTCP(_ fd: FileDescriptor) -> Bool {
        let family = clinux_socket_family(fd.rawValue)
        return family == AF_INET || family == AF_INET6
    }
}
