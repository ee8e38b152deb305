import Foundation
import CacheFetch

/// Errors of the launcher itself.
struct OriginError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Tests/Fixtures/fault-origin.py on 127.0.0.1 and a free port, serving a
/// private root made for the test (the same launch as IntegrationTests'
/// Harness, which this target cannot import). One per test: its request
/// log is then that test's alone. Killed and its files removed by `stop()`
/// (or when it goes away).
final class FaultOrigin {
    static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The files every origin serves, by path under its root.
    static let files: [String: [UInt8]] = [
        "data.json": Array(#"{"posts":[{"id":1,"title":"hello"},{"id":2,"title":"caf\u00e9"}]}"#.utf8),
        // Several 64 KiB chunks on the wire, and not a multiple of any.
        "big.bin": (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 / 977) },
    ]

    let scratch: String
    let port: Int
    private let process: Process

    var base: String { "http://127.0.0.1:\(port)" }
    func url(_ path: String) -> String { base + path }

    private init(scratch: String, port: Int, process: Process) {
        self.scratch = scratch
        self.port = port
        self.process = process
    }

    static func start() async throws -> FaultOrigin {
        var template = Array("/tmp/cf-origin-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw OriginError("mkdtemp failed")
        }
        let scratch = String(cString: made)
        let root = scratch + "/root"
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: root, withIntermediateDirectories: true)
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
        throw OriginError("the fault origin did not start")
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// One request as the origin saw it.
    struct LoggedRequest: Equatable {
        var path: String
        var status: Int
        var userAgent: String?
        var ifNoneMatch: String?
    }

    /// Every request served so far, in order (without the log requests themselves).
    func requests() throws -> [LoggedRequest] {
        let body = try get("/_log")
        guard let rows = try JSONSerialization.jsonObject(with: Data(body)) as? [[String: Any]] else {
            throw OriginError("/_log is not a list")
        }
        return rows.map {
            LoggedRequest(path: $0["path"] as? String ?? "", status: $0["status"] as? Int ?? 0,
                          userAgent: $0["ua"] as? String, ifNoneMatch: $0["inm"] as? String)
        }.filter { $0.path != "/_log" && $0.path != "/_stats" && $0.path != "/_fail" }
    }

    /// The log once it holds at least `count` requests (or after 10 s): the
    /// origin records a request after answering it, so a client may have
    /// its answer a moment before the log shows it.
    func requests(atLeast count: Int) async throws -> [LoggedRequest] {
        for _ in 0..<500 {
            let log = try requests()
            if log.count >= count { return log }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try requests()
    }

    /// Requests for `path` so far. Counted when they arrive, before the
    /// answer: exact as soon as the client has seen the last answer.
    func started(_ path: String) throws -> Int {
        let body = try get("/_stats")
        let counts = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Int]
        return counts?[path] ?? 0
    }

    /// Makes the next `times` requests for `path` answer `status`.
    func fail(_ path: String, times: Int, status: Int) throws {
        _ = try get("/_fail?path=\(path)&times=\(times)&status=\(status)")
    }

    /// A minimal HTTP/1.0 GET over a TCP socket, independent of the client under test.
    private func get(_ path: String) throws -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw OriginError("socket failed") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw OriginError("cannot connect to the origin") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw OriginError("bad HTTP answer to \(path)") }
        return Array(response[split.upperBound...])
    }
}

/// A short-delay policy, so that retries cost milliseconds.
func testPolicy(retries: Int = 3, maxRedirects: Int = 5, concurrency: Int = 4) -> FetchPolicy {
    var policy = FetchPolicy()
    policy.retries = retries
    policy.backoffBase = 0.01
    policy.connectTimeout = 5
    // A ceiling so that a broken client fails the test instead of hanging it.
    policy.totalTimeout = 20
    policy.maxRedirects = maxRedirects
    policy.concurrency = concurrency
    policy.userAgent = "cached-tests"
    // The origin is local: whatever proxy the environment names must not be used.
    policy.proxy = ""
    return policy
}

extension HTTPClient {
    /// The fetch, awaited.
    func fetch(_ request: HTTPRequest, into sink: BodySink) async -> Result<HTTPResponse, FetchError> {
        await withCheckedContinuation { continuation in
            fetch(request, into: sink) { continuation.resume(returning: $0) }
        }
    }

    func fetch(_ url: String, into sink: BodySink) async -> Result<HTTPResponse, FetchError> {
        await fetch(HTTPRequest(url: url), into: sink)
    }
}
