#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// A blocking connection to the daemon: send request lines, read answer lines
/// and raw byte payloads. Used by cachectl, the tests and the benchmarks.
public final class Client {
    public let socketPath: String
    /// How long each wait for the daemon may last.
    public let timeout: ClientTimeout
    private let fd: FileDescriptor
    private var buffer = LineBuffer(limit: ProtocolLimits.maxAnswerLine)
    /// When set, every wait for answer bytes ends by then, however the
    /// daemon trickles them (`ClientError.timedOut`): the total deadline of
    /// a quick call. Each wait is still limited by `timeout` as well.
    public var deadline: Deadline?
    /// Descriptors received (SCM_RIGHTS) and not yet matched to an `open`
    /// answer, in the order they came: the daemon passes one with the first
    /// byte of each successful `open` line (and those of the objects opened
    /// with the first byte of an `open` of many), so the oldest belong to
    /// the next such line read.
    var descriptors: [FileDescriptor] = []
    /// What each receive reads into, allocated once (a fresh zeroed 64 KiB
    /// per receive cost a memset per answer line).
    private var chunk = [UInt8](repeating: 0, count: 65536)

    /// Connects to the daemon at `socketPath`.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for the daemon (connect, send, answers);
    ///     `.none`, the default, waits as long as it takes.
    ///   - checkingDirectory: first refuse a socket whose directory another
    ///     user could write (see `SocketDirectory.problem`), with
    ///     `ClientError.untrustedDirectory`: cachectl sets it, so that nobody
    ///     else can put their own socket in the daemon's place.
    ///   - requiringOwner: with `checkingDirectory`, also refuse a socket
    ///     reached through a directory another user owns (not root, not the
    ///     caller): cachectl sets it unless `--socket` names the path.
    public init(socketPath: String, timeout: ClientTimeout = .none, checkingDirectory: Bool = false,
                requiringOwner: Bool = false) throws(ClientError) {
        self.socketPath = socketPath
        self.timeout = timeout
        if checkingDirectory, let reason = SocketDirectory.problem(socket: socketPath, requiringOwner: requiringOwner) {
            throw .untrustedDirectory(socket: socketPath, reason: reason)
        }
        fd = try Self.connect(socketPath, timeout: timeout.limit)
    }

    deinit {
        fd.close()
        for d in descriptors { d.close() }
    }

    /// A connected descriptor, with `SO_SNDTIMEO` and `SO_RCVTIMEO` set to
    /// `limit` first. A Unix socket whose listener's backlog is full makes
    /// `connect` wait for room; with `SO_SNDTIMEO` set that wait ends after
    /// the timeout with `EAGAIN` (net/unix/af_unix.c, unix_stream_connect).
    private static func connect(_ path: String, timeout limit: Duration?) throws(ClientError) -> FileDescriptor {
        let raw = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard raw >= 0 else { throw .notRunning(socket: path, cause: SystemError("socket", path)) }
        let fd = FileDescriptor(rawValue: raw, path: path)
        if let limit {
            let nanos = limit.wholeNanoseconds
            var tv = timeval(tv_sec: Int(nanos / 1_000_000_000), tv_usec: Int(nanos % 1_000_000_000 / 1000))
            if tv.tv_sec == 0 && tv.tv_usec == 0 { tv.tv_usec = 1 }
            for option in [SO_RCVTIMEO, SO_SNDTIMEO] where setsockopt(raw, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size)) != 0 {
                let error = SystemError("setsockopt", path)
                fd.close()
                throw .io(error)
            }
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= UnixSocket.maxPathLength else {
            fd.close()
            throw .notRunning(socket: path, cause: SystemError("socket path too long", path, errno: ENAMETOOLONG))
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        while true {
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(raw, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc == 0 { return fd }
            let error = SystemError("connect", path)
            if error.errno == EINTR { continue }
            fd.close()
            if let limit, error.errno == EAGAIN || error.errno == EINPROGRESS { throw .timedOut(socket: path, after: limit) }
            throw .notRunning(socket: path, cause: error)
        }
    }

    /// The underlying descriptor (for tests that misbehave on purpose).
    public var descriptor: FileDescriptor { fd }

    /// Sends raw bytes (one or more request lines).
    public func send(_ bytes: [UInt8]) throws(ClientError) {
        var sent = 0
        while sent < bytes.count {
            let n: Int
            do {
                n = try bytes.withBytes { (raw) throws(SystemError) -> Int in
                    try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[sent...]))
                }
            } catch {
                // The daemon closed the connection (it is stopping) before reading the request.
                if error.errno == EPIPE || error.errno == ECONNRESET { throw .closed(socket: socketPath) }
                throw .io(error)
            }
            // 0: the send timeout passed with the daemon not reading.
            if n == 0, let limit = timeout.limit { throw .timedOut(socket: socketPath, after: limit) }
            sent += n
        }
    }

    private func fill() throws(ClientError) {
        while true {
            // recvmsg, not recv: descriptors passed with `open` answers
            // would otherwise be closed by the kernel unseen.
            if let deadline, !deadline.waitReadable(fd) {
                throw .timedOut(socket: socketPath, after: deadline.allowance)
            }
            let got: UnixSocket.Received
            do {
                // Room for the most one message passes (an `open` of many):
                // descriptors that do not fit are closed by the kernel.
                got = try chunk.withMutableBytes { (raw) throws(SystemError) in
                    try UnixSocket.receive(fd, into: raw, maxDescriptors: UnixSocket.maxPassedDescriptors)
                }
            } catch {
                if error.errno == ECONNRESET { throw .closed(socket: socketPath) }
                throw .io(error)
            }
            descriptors += got.descriptors
            if descriptors.count > ProtocolLimits.maxPendingDescriptors {
                for d in descriptors { d.close() }
                descriptors = []
                throw .malformed("more than \(ProtocolLimits.maxPendingDescriptors) descriptors passed ahead of their open answers")
            }
            if got.truncated {
                throw .malformed("descriptors passed with an answer were dropped (too many in one message, or this process is at its open-file limit)")
            }
            let n = got.count
            if let n, n > 0 {
                buffer.makeRoom(for: n)
                chunk.withUnsafeBytes { buffer.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                return
            }
            // nil: the receive timeout passed with nothing from the daemon.
            guard n == nil, let limit = timeout.limit else { throw .closed(socket: socketPath) }
            guard case .whileAlive = timeout, daemonAnswersPing(within: limit) else {
                throw .timedOut(socket: socketPath, after: limit)
            }
        }
    }

    /// Whether the daemon answers `ping` on a new connection within `limit`:
    /// any answer line counts (even `busy`), silence or no connection does not.
    private func daemonAnswersPing(within limit: Duration) -> Bool {
        do {
            let probe = try Client(socketPath: socketPath, timeout: .answer(limit))
            probe.deadline = Deadline(after: limit)
            try probe.send(Request.line(op: "ping", []))
            _ = try probe.readLine()
            return true
        } catch {
            return false
        }
    }

    /// Reads one line (without `\n`).
    public func readLine() throws(ClientError) -> [UInt8] {
        while true {
            switch buffer.nextLine() {
            case .line(let l): return Array(l)
            case .incomplete: try fill()
            case .tooLong: throw .malformed("an answer line longer than \(buffer.limit) bytes")
            }
        }
    }

    /// Reads one line and parses it as a JSON object, at most
    /// `ProtocolLimits.maxAnswerDepth` deep.
    public func readJSON() throws(ClientError) -> JSON {
        let line = try readLine()
        let value: JSON
        do { value = try JSONParser.parse(line, maxDepth: ProtocolLimits.maxAnswerDepth) } catch {
            throw .malformed("\(error): \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        guard case .object = value else {
            throw .malformed("an answer that is not a JSON object: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        return value
    }

    /// Reads exactly `count` raw bytes, handing them to `sink` in chunks.
    public func readBytes(_ count: Int, into sink: (ArraySlice<UInt8>) throws -> Void) throws {
        var remaining = count
        while remaining > 0 {
            let chunk = buffer.takeBytes(upTo: remaining)
            if chunk.isEmpty { try fill(); continue }
            remaining -= chunk.count
            try sink(chunk)
        }
    }

    /// Sends one request and reads its single answer line.
    public func call(_ op: String, _ fields: [(String, JSON)] = []) throws(ClientError) -> JSON {
        try send(Request.line(op: op, fields))
        return try readJSON()
    }

    /// An `open` answer: a success, with the descriptor that came with it,
    /// or an error answer.
    public enum OpenAnswer: Sendable {
        /// The object's file, read-only, position 0 (use `pread` or read it
        /// from the start), checked to be a regular file of `size` bytes;
        /// the caller closes it. `answer` is the line, parsed.
        case file(FileDescriptor, size: Int64, answer: JSON)
        /// An `{"ok":false,...}` line (or any line whose `ok` is not true).
        case error(JSON)

        /// The answer line, parsed (`ok`, `size` or `error`).
        public var answer: JSON {
            switch self {
            case .file(_, _, let answer), .error(let answer): answer
            }
        }

        /// The object's file; nil for an error answer.
        public var file: FileDescriptor? {
            if case .file(let fd, _, _) = self { fd } else { nil }
        }
    }

    /// Sends `open` for the object `hash` and reads its answer. Only this
    /// request may be in flight: descriptors beyond the one for its line are
    /// closed.
    public func open(hash: String) throws(ClientError) -> OpenAnswer {
        try send(Request.line(op: "open", [("hash", .string(hash))]))
        let answer = try readOpenAnswer()
        for d in descriptors { d.close() }
        descriptors = []
        return answer
    }

    /// Reads the next line as the answer to an `open` sent earlier (for a
    /// client that pipelines): a success takes the oldest descriptor
    /// received; a success without one is `ClientError.malformed`.
    public func readOpenAnswer() throws(ClientError) -> OpenAnswer {
        let answer = try readJSON()
        guard answer["ok"]?.bool == true else { return .error(answer) }
        guard !descriptors.isEmpty else {
            throw .malformed("an open answer came without a file descriptor (a daemon older than open, or a proxy that does not pass descriptors): \(String(decoding: answer.encoded, as: UTF8.self))")
        }
        let file = descriptors.removeFirst()
        guard let size = answer["size"]?.integer, size >= 0 else {
            file.close()
            throw .malformed("an open answer without a size: \(String(decoding: answer.encoded, as: UTF8.self))")
        }
        if let problem = PassedFile.problem(file, size: size) {
            file.close()
            throw .malformed("the descriptor passed with an open answer is \(problem)")
        }
        return .file(file, size: size, answer: answer)
    }

    /// Descriptors received and not yet taken by `readOpenAnswer` (tests).
    public var pendingDescriptors: Int { descriptors.count }

    /// Half-closes the sending side.
    public func shutdownWrite() { _ = Glibc.shutdown(fd.rawValue, Int32(SHUT_WR)) }
}

/// Whether cachectl may trust the directory a socket is in. Whoever can
/// write that directory can replace the socket with their own and answer
/// in the daemon's place (forged posts, forged image paths).
public enum SocketDirectory {
    /// Nil when the directory of the socket at `path` is safe to use, or
    /// cannot be examined (then connecting fails with its own reason);
    /// otherwise what is wrong, naming the directory, its owner and mode,
    /// and how to fix it.
    ///
    /// - The per-user directory (`privateDirectory`, by default
    ///   `/tmp/cached-<uid>`, which anyone could have created first) must be
    ///   a real directory owned by the caller that neither group nor others
    ///   can write.
    /// - Any other directory may belong to another user (a daemon of a user
    ///   the caller trusts, named by `--socket`), but must not be writable by
    ///   group or others, unless it is root's and sticky (`/tmp`): there
    ///   nobody can replace a socket they do not own. With `requiringOwner`
    ///   (a path the user did not name), none may belong to a user other
    ///   than root and the caller either: that user could replace the
    ///   socket (the daemon's own rule for its directories).
    public static func problem(socket path: String, privateDirectory: String = DefaultPaths.privateTempDirectory,
                               requiringOwner: Bool = false) -> String? {
        var dir = FileSystem.directoryName(of: path)
        while dir.count > 1 && dir.hasSuffix("/") { dir.removeLast() }
        var st = stat()
        guard lstat(dir, &st) == 0 else { return nil }
        if isSame(dir, privateDirectory) {
            return TrustedDirectory.problem(dir, allowRoot: false, allowSticky: false)
        }
        // The directory itself, through any link in its spelling (/var/run -> /run),
        // and every directory above it: one that others can write lets them
        // move the socket's directory aside and put their own in its place.
        var current = dir
        while true {
            if let p = writableByOthers(current) ?? (requiringOwner ? ownedByOthers(current) : nil) {
                return current == dir ? p : "a directory above the socket: " + p
            }
            if current == "/" || current == "." || current.isEmpty { return nil }
            current = FileSystem.directoryName(of: current)
        }
    }

    /// What is wrong with `dir` belonging to a user other than root and the caller, or nil.
    private static func ownedByOthers(_ dir: String) -> String? {
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid != 0, st.st_uid != geteuid() else { return nil }
        return "\(dir) is owned by \(userName(st.st_uid)), not by root or you, who could replace the socket in it "
            + "(if you trust that user, name the socket with --socket \(dir)/...)"
    }

    /// What is wrong with `dir` being writable by group or others (not
    /// root's and sticky), or nil.
    private static func writableByOthers(_ dir: String) -> String? {
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return nil }
        let writable = st.st_mode & (S_IWGRP | S_IWOTH) != 0
        let rootSticky = st.st_uid == 0 && st.st_mode & S_ISVTX != 0
        guard writable && !rootSticky else { return nil }
        let who = st.st_mode & S_IWOTH != 0 ? "every user" : "its group"
        return "\(dir) (owner \(userName(st.st_uid)), mode \(String(st.st_mode & 0o7777, radix: 8))) can be written by \(who), " +
            "who could replace the socket in it (chmod go-w \(dir), or give the daemon a socket in a directory only its owner can write)"
    }

    /// Whether `a` and `b` name the same directory (as spelled, or the same inode).
    private static func isSame(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        var sa = stat(), sb = stat()
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    /// `nobody (uid 65534)`, or `uid 1234` for a uid with no name.
    ///
    /// The name comes from /etc/passwd, not `getpwuid`: cachectl is linked
    /// statically (a fraction of the start-up time and memory), and a
    /// static glibc can reach the other NSS sources only by loading shared
    /// libraries at run time. A user known only to them (LDAP, systemd's
    /// DynamicUser=) is shown as `uid N`; this is only for a message.
    static func userName(_ uid: uid_t, passwd: String = "/etc/passwd") -> String {
        if let fd = try? FileDescriptor.open(passwd, .readOnly) {
            defer { fd.close() }
            if let text = try? fd.readToEnd(limit: 4 << 20) {
                for line in text.split(separator: 0x0A) {
                    let fields = line.split(separator: UInt8(ascii: ":"), maxSplits: 3, omittingEmptySubsequences: false)
                    if fields.count >= 3, let n = UInt32(String(decoding: fields[2], as: UTF8.self)), n == uid, !fields[0].isEmpty {
                        return "\(String(decoding: fields[0], as: UTF8.self)) (uid \(uid))"
                    }
                }
            }
        }
        return "uid \(uid)"
    }
}

/// Where the daemon keeps its store and socket when not told (docs/operations.md, "Configuration").
public enum DefaultPaths {
    /// The socket path the daemon binds by default in this environment.
    public static func socket(environment env: [String: String]) -> String {
        if let dir = env["RUNTIME_DIRECTORY"], !dir.isEmpty { return firstPath(dir) + "/cached.sock" }
        if getuid() == 0 { return "/run/cached/cached.sock" }
        if let dir = env["XDG_RUNTIME_DIR"], !dir.isEmpty { return dir + "/cached.sock" }
        return privateTempDirectory + "/cached.sock"
    }

    /// The store directory the daemon uses by default in this environment.
    public static func store(environment env: [String: String]) -> String {
        if let dir = env["CACHE_DIRECTORY"], !dir.isEmpty { return firstPath(dir) }
        if getuid() == 0 { return "/var/cache/cached" }
        if let dir = env["XDG_CACHE_HOME"], !dir.isEmpty { return dir + "/cached" }
        if let home = env["HOME"], !home.isEmpty, home != "/" { return home + "/.cache/cached" }
        return privateTempDirectory + "/store"
    }

    /// The socket cachectl tries: `CACHED_SOCKET`, else the user's default if
    /// it exists, else the system daemon's if that exists, else the user's.
    public static func clientSocket(environment env: [String: String]) -> String {
        if let s = env["CACHED_SOCKET"], !s.isEmpty { return s }
        let mine = socket(environment: env)
        let system = "/run/cached/cached.sock"
        // A path that cannot be examined counts as absent: connecting to it then says why.
        if (try? FileSystem.status(mine)) == nil, (try? FileSystem.status(system)) != nil { return system }
        return mine
    }

    /// `/tmp/cached-<uid>`, for users with no XDG directories.
    public static var privateTempDirectory: String { "/tmp/cached-\(getuid())" }

    /// systemd passes several directories separated by `:`; the first is ours.
    private static func firstPath(_ list: String) -> String {
        String(list.split(separator: ":").first ?? Substring(list))
    }
}
