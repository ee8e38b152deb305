import Foundation

/// Errors of the test support itself.
public struct SupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Tests/Fixtures/fault-origin.py on 127.0.0.1 and a free port, serving a
/// private root made for one test (so its request log is that test's
/// alone): a copy of a directory and/or the given files. `stop()` (or
/// dropping it) kills it and removes its files. Shared by the unit-test
/// targets; IntegrationTests has the daemon-side harness of its own.
public final class FaultOrigin {
    /// The package's root directory.
    public static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()
    /// The bundled example origin (posts.json, images/).
    public static let examples = packageRoot + "/Examples/origin"

    public let scratch: String
    public let root: String
    public let port: Int
    private let process: Process

    public var base: String { "http://127.0.0.1:\(port)" }
    public func url(_ path: String) -> String { base + path }

    private init(scratch: String, port: Int, process: Process) {
        self.scratch = scratch
        self.root = scratch + "/root"
        self.port = port
        self.process = process
    }

    /// Starts an origin serving a copy of `directory` (if any) plus `files`
    /// (path under the root → bytes).
    public static func launch(copying directory: String? = nil, files: [String: [UInt8]] = [:]) async throws -> FaultOrigin {
        let scratch = try makeTempDirectory("fault-origin")
        let root = scratch + "/root"
        let fm = FileManager.default
        do {
            if let directory { try fm.copyItem(atPath: directory, toPath: root) }
            else { try fm.createDirectory(atPath: root, withIntermediateDirectories: true) }
            for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: root + "/" + name)) }
        } catch {
            try? fm.removeItem(atPath: scratch)
            throw error
        }
        let portFile = scratch + "/port"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", packageRoot + "/Tests/Fixtures/fault-origin.py", "--root", root, "--port-file", portFile]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<500 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text) {
                return FaultOrigin(scratch: scratch, port: port, process: process)
            }
            if !process.isRunning { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? fm.removeItem(atPath: scratch)
        throw SupportError("the fault origin did not start")
    }

    deinit { stop() }

    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// The bytes of a file the origin serves, by path under its root ("images/01-sunrise.png").
    public func file(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + path)))
    }

    /// One request as the origin saw it.
    public struct LoggedRequest: Equatable, Sendable {
        public var path: String
        public var status: Int
        public var userAgent: String?
        public var ifNoneMatch: String?
        /// Every header as received, by lowercased name (all its values).
        public var headers: [String: [String]]
        /// The client's port: one per connection.
        public var port: Int
        public init(path: String, status: Int, userAgent: String? = nil, ifNoneMatch: String? = nil,
                    headers: [String: [String]] = [:], port: Int = 0) {
            self.path = path
            self.status = status
            self.userAgent = userAgent
            self.ifNoneMatch = ifNoneMatch
            self.headers = headers
            self.port = port
        }

        /// Path, status, user agent and If-None-Match alone, to compare with those.
        public var essentials: LoggedRequest {
            LoggedRequest(path: path, status: status, userAgent: userAgent, ifNoneMatch: ifNoneMatch)
        }
    }

    /// Every request served so far, in order (without the origin's own `/_` requests).
    public func requests() throws -> [LoggedRequest] {
        let body = try get("/_log")
        guard let rows = try JSONSerialization.jsonObject(with: Data(body)) as? [[String: Any]] else {
            throw SupportError("/_log is not a list")
        }
        return rows.map {
            LoggedRequest(path: $0["path"] as? String ?? "", status: $0["status"] as? Int ?? 0,
                          userAgent: $0["ua"] as? String, ifNoneMatch: $0["inm"] as? String,
                          headers: $0["headers"] as? [String: [String]] ?? [:], port: $0["port"] as? Int ?? 0)
        }.filter { !$0.path.hasPrefix("/_") }
    }

    /// The log once it holds at least `count` requests (or after 10 s): the
    /// origin records a request after answering it, so a client may have
    /// its answer a moment before the log shows it.
    public func requests(atLeast count: Int) async throws -> [LoggedRequest] {
        for _ in 0..<500 {
            let log = try requests()
            if log.count >= count { return log }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try requests()
    }

    /// Requests for `path` so far. Counted when they arrive, before the
    /// answer: exact as soon as the client has seen the last answer.
    public func started(_ path: String) throws -> Int {
        let body = try get("/_stats")
        let counts = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Int]
        return counts?[path] ?? 0
    }

    /// Makes `/auth/PATH` answer only requests with `Authorization: Bearer TOKEN`.
    public func requireToken(_ token: String) throws {
        _ = try get("/_token?value=\(token)")
    }

    /// Makes the next `times` requests for `path` answer `status`.
    public func fail(_ path: String, times: Int, status: Int) throws {
        _ = try get("/_fail?path=\(path)&times=\(times)&status=\(status)")
    }

    /// A minimal HTTP/1.0 GET over a TCP socket, independent of the client under test.
    private func get(_ path: String) throws -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SupportError("socket failed") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw SupportError("cannot connect to the origin") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw SupportError("bad HTTP answer to \(path)") }
        return Array(response[split.upperBound...])
    }
}

/// A fresh directory made by mkdtemp under /tmp.
public func makeTempDirectory(_ prefix: String) throws -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw SupportError("mkdtemp failed: errno \(errno)")
    }
    return String(cString: made)
}
