#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Why a client call failed.
public enum ClientError: Error, CustomStringConvertible, Sendable {
    /// Nothing listens on the socket.
    case notRunning(socket: String, cause: SystemError)
    /// The daemon closed the connection before answering.
    case closed(socket: String)
    /// The daemon answered something that is not a protocol line.
    case malformed(String)
    case io(SystemError)

    public var description: String {
        switch self {
        case let .notRunning(socket, cause):
            let why = cause.errno == ENOENT ? "no socket at \(socket)" : "\(cause)"
            return "cannot connect to cached at \(socket): \(why) (is the daemon running? set --socket or CACHED_SOCKET)"
        case let .closed(socket): return "cached closed the connection on \(socket) before answering"
        case let .malformed(what): return "malformed answer from cached: \(what)"
        case let .io(e): return "socket error: \(e)"
        }
    }
}

/// A blocking connection to the daemon: send request lines, read answer lines
/// and raw byte payloads. Used by cachectl, the tests and the benchmarks.
public final class Client {
    public let socketPath: String
    private let fd: FileDescriptor
    private var buffer = LineBuffer(limit: 1 << 30)

    public init(socketPath: String) throws(ClientError) {
        self.socketPath = socketPath
        do { fd = try UnixSocket.connect(path: socketPath) } catch {
            throw .notRunning(socket: socketPath, cause: error)
        }
    }

    deinit { fd.close() }

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
            } catch { throw .io(error) }
            sent += n
        }
    }

    private func fill() throws(ClientError) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n: Int?
        do {
            n = try chunk.withMutableBytes { (raw) throws(SystemError) -> Int? in try UnixSocket.receive(fd, into: raw) }
        } catch { throw .io(error) }
        guard let n, n > 0 else { throw .closed(socket: socketPath) }
        buffer.append(Array(chunk[0..<n]))
    }

    /// Reads one line (without `\n`).
    public func readLine() throws(ClientError) -> [UInt8] {
        while true {
            switch buffer.nextLine() {
            case .line(let l): return Array(l)
            case .incomplete, .tooLong: try fill()
            }
        }
    }

    /// Reads one line and parses it as JSON.
    public func readJSON() throws(ClientError) -> JSON {
        let line = try readLine()
        do { return try JSONParser.parse(line) } catch {
            throw .malformed("\(error): \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
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

    /// Half-closes the sending side.
    public func shutdownWrite() { _ = Glibc.shutdown(fd.rawValue, Int32(SHUT_WR)) }
}

/// Where the daemon keeps its store and socket when not told (SPEC section 4).
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
