import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem

/// Errors of the test support itself.
struct SupportError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A fresh directory made by mkdtemp under /tmp.
func makeTempDirectory(_ prefix: String) throws -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw SupportError("mkdtemp failed: errno \(errno)")
    }
    return String(cString: made)
}

/// Tests/Fixtures/fault-origin.py on 127.0.0.1 and a free port, serving a
/// private copy of Examples/origin (posts.json, images/) plus `extra` files
/// (the launch of CacheFetchTests' FaultOrigin). One per test, so that its
/// request log is that test's alone. `stop()` kills it and removes its files.
final class ServiceOrigin {
    static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()
    static let examples = packageRoot + "/Examples/origin"

    let scratch: String
    let root: String
    let port: Int
    private let process: Process

    var base: String { "http://127.0.0.1:\(port)" }
    func url(_ path: String) -> String { base + path }

    private init(scratch: String, port: Int, process: Process) {
        self.scratch = scratch
        self.root = scratch + "/root"
        self.port = port
        self.process = process
    }

    static func start(extra: [String: [UInt8]] = [:]) async throws -> ServiceOrigin {
        let scratch = try makeTempDirectory("svc-origin")
        let root = scratch + "/root"
        let fm = FileManager.default
        do {
            try fm.copyItem(atPath: examples, toPath: root)
            for (name, bytes) in extra { try Data(bytes).write(to: URL(fileURLWithPath: root + "/" + name)) }
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
                return ServiceOrigin(scratch: scratch, port: port, process: process)
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

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// The bytes of a file the origin serves, by path under its root ("images/01-sunrise.png").
    func file(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + path)))
    }

    /// One request as the origin saw it.
    struct LoggedRequest: Equatable {
        var path: String
        var status: Int
        var ifNoneMatch: String?
    }

    /// Every request served so far, in order (without the log requests themselves).
    func requests() throws -> [LoggedRequest] {
        let body = try get("/_log")
        guard let rows = try JSONSerialization.jsonObject(with: Data(body)) as? [[String: Any]] else {
            throw SupportError("/_log is not a list")
        }
        return rows.map {
            LoggedRequest(path: $0["path"] as? String ?? "", status: $0["status"] as? Int ?? 0,
                          ifNoneMatch: $0["inm"] as? String)
        }.filter { !$0.path.hasPrefix("/_") }
    }

    /// The log once it holds at least `count` requests (or after 10 s): the
    /// origin records a request after answering it.
    func requests(atLeast count: Int) async throws -> [LoggedRequest] {
        for _ in 0..<500 {
            let log = try requests()
            if log.count >= count { return log }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try requests()
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

/// What Examples/origin serves, read independently of the code under test.
enum ExampleOrigin {
    /// The manifest's URLs as written, in row order.
    static func manifestURLs() throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/images/manifest.json"))
        guard let rows = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw SupportError("the example manifest is not a list of objects")
        }
        return rows.map { $0["url"] as? String ?? "" }
    }

    /// The posts feed's elements, each without insignificant whitespace.
    static func minifiedPosts() throws -> [[UInt8]] {
        let text = Array(try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/posts.json")))
        return elements(ofArray: minify(text))
    }

    /// JSON text without whitespace outside strings.
    static func minify(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false, escaped = false
        for b in text {
            if inString {
                out.append(b)
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            } else if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
                continue
            } else {
                out.append(b)
                if b == UInt8(ascii: "\"") { inString = true }
            }
        }
        return out
    }

    /// The top-level elements of a minified JSON array, as text.
    static func elements(ofArray text: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var current: [UInt8] = []
        var depth = 0
        var inString = false, escaped = false
        for b in text {
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
                current.append(b)
                continue
            }
            switch b {
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > 1 { current.append(b) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if depth > 1 { current.append(b) }
                depth -= 1
                if depth == 0, !current.isEmpty { out.append(current); current = [] }
            case UInt8(ascii: ",") where depth == 1:
                out.append(current); current = []
            default:
                if b == UInt8(ascii: "\"") { inString = true }
                current.append(b)
            }
        }
        return out
    }
}

/// A service over a real store in a fresh temporary directory, and
/// (usually) a fault origin. `close()` shuts the service down, stops the
/// origin and removes the directory.
final class Harness {
    let origin: ServiceOrigin?
    let directory: String
    let storeDirectory: String
    let service: CacheService
    private var closed = false

    static func feeds(_ origin: ServiceOrigin?, posts: String? = "/posts.json",
                      images: String? = "/images/manifest.json") -> FeedConfiguration {
        FeedConfiguration(postsURL: posts.flatMap { p in origin.map { $0.url(p) } },
                          imagesURL: images.flatMap { p in origin.map { $0.url(p) } },
                          imagesBaseURL: nil, maxObjectSize: 1 << 20)
    }

    /// A harness with its own origin (serving `extra` too) and the default feeds.
    static func start(extra: [String: [UInt8]] = [:], workerThreads: Int = 2,
                      feeds: ((ServiceOrigin) -> FeedConfiguration)? = nil) async throws -> Harness {
        let origin = try await ServiceOrigin.start(extra: extra)
        return try Harness(origin: origin, feeds: feeds?(origin) ?? Harness.feeds(origin), workerThreads: workerThreads)
    }

    /// A harness over `storeDirectory` (default: a fresh one under the harness's directory).
    init(origin: ServiceOrigin?, feeds: FeedConfiguration, storeDirectory: String? = nil,
         directory: String? = nil, workerThreads: Int = 2) throws {
        self.origin = origin
        let dir = try directory ?? makeTempDirectory("svc-test")
        self.directory = dir
        self.storeDirectory = storeDirectory ?? dir + "/store"
        let configuration = ServiceConfiguration(feeds: feeds, storeDirectory: self.storeDirectory, maxBytes: 0,
                                                 fetch: servicePolicy(), workerThreads: workerThreads)
        do {
            service = try CacheService.open(configuration, userAgent: "test", log: Logger(level: .error, environment: [:]))
        } catch {
            if directory == nil { try? FileManager.default.removeItem(atPath: dir) }
            origin?.stop()
            throw error
        }
    }

    /// Shuts the service down (once), then stops the origin and removes the directory.
    func close(keepDirectory: Bool = false) {
        if !closed { service.shutdown(); closed = true }
        guard !keepDirectory else { return }
        origin?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Only shuts the service down (the store stays for a reopen).
    func shutdownService() {
        if !closed { service.shutdown(); closed = true }
    }

    func url(_ path: String) -> String { origin!.url(path) }
}

/// A short-delay policy: retries cost milliseconds, and the origin is local.
func servicePolicy() -> FetchPolicy {
    var policy = FetchPolicy()
    policy.retries = 2
    policy.backoffBase = 0.01
    policy.connectTimeout = 5
    // A ceiling so that a broken client fails the test instead of hanging it.
    policy.totalTimeout = 20
    policy.concurrency = 4
    policy.proxy = ""
    return policy
}

// MARK: Bridging completions

/// How an operation answered: at once, or through its completion.
enum Answer<V: Sendable>: Sendable {
    case now(Result<V, CacheError>)
    case later(Result<V, CacheError>)

    var result: Result<V, CacheError> {
        switch self {
        case .now(let r), .later(let r): return r
        }
    }
    var isNow: Bool { if case .now = self { return true } else { return false } }
    var value: V? { if case .success(let v) = result { return v } else { return nil } }
    var error: CacheError? { if case .failure(let e) = result { return e } else { return nil } }
}

/// Resumes a continuation once; a second resume is recorded as an issue
/// (an operation that answered `.now` and also called its completion, or
/// called it twice).
final class Once<V: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<V, Never>?>
    init(_ c: CheckedContinuation<V, Never>) { continuation = Locked(c) }
    func resume(_ value: V) {
        let c = continuation.withLock { c -> CheckedContinuation<V, Never>? in defer { c = nil }; return c }
        guard let c else { Issue.record("answered twice"); return }
        c.resume(returning: value)
    }
}

/// Calls an `Outcome`-returning operation and waits for its answer.
func answer<V: Sendable>(_ call: (@escaping Completion<V>) -> Outcome<V>) async -> Answer<V> {
    await withCheckedContinuation { (c: CheckedContinuation<Answer<V>, Never>) in
        let once = Once(c)
        let outcome = call { once.resume(.later($0)) }
        if case .now(let r) = outcome { once.resume(.now(r)) }
    }
}

/// Calls a completion-only operation and waits for its answer.
func completion<V: Sendable>(_ call: (@escaping @Sendable (V) -> Void) -> Void) async -> V {
    await withCheckedContinuation { (c: CheckedContinuation<V, Never>) in
        let once = Once(c)
        call { once.resume($0) }
    }
}

/// Collects progress events from any thread.
final class ProgressLog: Sendable {
    private let events = Locked<[ServiceProgress]>([])
    var all: [ServiceProgress] { events.withLock { $0 } }
    var callback: @Sendable (ServiceProgress) -> Void { { [events] p in events.withLock { $0.append(p) } } }
}

