import Foundation
import CacheProtocol
import CacheSystem

/// Errors of the test harness itself.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Where things are: the package, the built binaries, the bundled origin.
enum Paths {
    static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The directory holding the built `cached` and `cachectl`.
    static let binDir: String = {
        if let dir = ProcessInfo.processInfo.environment["CACHED_BIN_DIR"] { return dir }
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for candidate in [runner.deletingLastPathComponent(), runner.deletingLastPathComponent().deletingLastPathComponent()] {
            if FileManager.default.isExecutableFile(atPath: candidate.appendingPathComponent("cached").path) { return candidate.path }
        }
        return packageRoot + "/.build/debug"
    }()

    static var cached: String { binDir + "/cached" }
    static var cachectl: String { binDir + "/cachectl" }
    static var exampleOrigin: String { packageRoot + "/Examples/origin" }
    /// The bundled origin plus fault endpoints (Tests/Fixtures/fault-origin.py).
    static var originScript: String { packageRoot + "/Tests/Fixtures/fault-origin.py" }
}

/// A fresh directory under /tmp (short, so socket paths fit in sun_path).
final class Scratch {
    let path: String
    init() {
        var template = Array("/tmp/cached-it-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Polls `condition` every 20 ms for up to `seconds`.
func waitUntil(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// The bundled python origin on 127.0.0.1, serving a private copy of
/// Examples/origin that a test may change. It counts requests per path.
final class Origin {
    let scratch = Scratch()
    let root: String
    let port: Int
    private let process = Process()

    init(delay: Double = 0) throws {
        root = scratch.path + "/root"
        try FileManager.default.copyItem(atPath: Paths.exampleOrigin, toPath: root)
        let portFile = scratch.path + "/port"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Paths.originScript, "--root", root, "--port-file", portFile, "--delay", String(delay)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard waitUntil(10, { FileManager.default.fileExists(atPath: portFile) }),
              let text = try? String(contentsOfFile: portFile, encoding: .utf8), let p = Int(text) else {
            process.terminate()
            throw HarnessError("the origin server did not start")
        }
        port = p
    }

    deinit { self.stop() }

    var base: String { "http://127.0.0.1:\(port)" }
    var postsURL: String { base + "/posts.json" }
    var manifestURL: String { base + "/images/manifest.json" }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Requests served per path.
    func counts() throws -> [String: Int] {
        let body = try httpGet("/_stats")
        var out: [String: Int] = [:]
        if case .object(let pairs) = try JSONParser.parse(body) {
            for (k, v) in pairs { out[k] = Int(v.integer ?? 0) }
        }
        return out
    }

    func count(_ path: String) throws -> Int { try counts()[path] ?? 0 }

    /// One request as the origin saw it.
    struct LoggedRequest {
        var path: String
        var status: Int
        var bytes: Int
        var userAgent: String?
        var ifNoneMatch: String?
        var ifModifiedSince: String?
        /// The client's port: one per connection.
        var port: Int
        /// Every header as received, by lowercased name (all its values).
        var headers: [String: [String]] = [:]
    }

    /// Every request served, in order.
    func requests() throws -> [LoggedRequest] {
        (try JSONParser.parse(httpGet("/_log")).array ?? []).map {
            LoggedRequest(path: $0["path"]?.string ?? "", status: Int($0["status"]?.integer ?? 0), bytes: Int($0["bytes"]?.integer ?? 0),
                          userAgent: $0["ua"]?.string, ifNoneMatch: $0["inm"]?.string, ifModifiedSince: $0["ims"]?.string,
                          port: Int($0["port"]?.integer ?? 0), headers: Self.headers($0["headers"]))
        }
    }

    private static func headers(_ json: JSON?) -> [String: [String]] {
        guard case .object(let pairs)? = json else { return [:] }
        var out: [String: [String]] = [:]
        for (name, values) in pairs { out[name] = (values.array ?? []).compactMap(\.string) }
        return out
    }

    /// Makes `/auth/PATH` answer only requests with `Authorization: Bearer TOKEN`.
    func requireToken(_ token: String) throws {
        _ = try httpGet("/_token?value=\(token)")
    }

    /// Makes the next `times` requests for `path` answer `status`.
    func fail(_ path: String, times: Int, status: Int) throws {
        _ = try httpGet("/_fail?path=\(path)&times=\(times)&status=\(status)")
    }

    func write(_ relative: String, _ contents: String) throws {
        try write(relative, bytes: Array(contents.utf8))
    }

    private var edits = 0

    /// Replaces a file, with a modification time later than any before:
    /// http.server's Last-Modified has one-second resolution, and an edit
    /// within the same second would rightly be answered 304 Not Modified.
    func write(_ relative: String, bytes: [UInt8]) throws {
        let path = root + "/" + relative
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        edits += 1
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(Double(10 * edits))], ofItemAtPath: path)
    }

    func read(_ relative: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative)))
    }

    /// A minimal HTTP/1.0 GET over a TCP socket: the body.
    private func httpGet(_ path: String) throws -> [UInt8] {
        try SimpleHTTP.get(port: port, path: path).body
    }
}

/// The real `cached` binary, on its own store and socket.
final class Daemon {
    let scratch: Scratch
    let store: String
    let socket: String
    let logPath: String
    private let process = Process()
    private(set) var exitStatus: Int32?

    /// Starts the daemon and waits until it answers `ping`.
    init(origin: Origin?, arguments: [String] = [], scratch: Scratch = Scratch(), waitReady: Bool = true,
         environment extra: [String: String] = [:], launcher: [String] = [], executable: String = Paths.cached) throws {
        self.scratch = scratch
        store = scratch.path + "/store"
        socket = scratch.path + "/sock"
        logPath = scratch.path + "/daemon-\(UUID().uuidString.prefix(8)).log"
        var args = ["--store", store, "--socket", socket, "--log-level", "debug"]
        if let origin { args += ["--posts-url", origin.postsURL, "--images-url", origin.manifestURL] }
        // A launcher (such as `prlimit --nofile=N`) must exec the daemon, so its pid is the daemon's.
        process.executableURL = URL(fileURLWithPath: launcher.first ?? executable)
        process.arguments = (launcher.isEmpty ? [] : Array(launcher.dropFirst()) + [executable]) + args + arguments
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "NOTIFY_SOCKET")
        env.removeValue(forKey: "LISTEN_FDS")
        env.merge(extra) { _, new in new }
        process.environment = env
        try process.run()
        if waitReady {
            let ready = waitUntil(20) { [self] in
                guard process.isRunning else { return true }
                return (try? Client(socketPath: socket).call("ping")["ok"]?.bool) == true
            }
            guard ready, process.isRunning else {
                throw HarnessError("cached did not become ready: \(log)")
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func client() throws -> Client { try Client(socketPath: socket) }

    /// One request on a fresh connection.
    func call(_ op: String, _ fields: [(String, JSON)] = []) throws -> JSON {
        try client().call(op, fields)
    }

    /// SIGTERM, then waits; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        exitStatus = process.terminationStatus
        return process.terminationStatus
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for the process to exit by itself.
    func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Prefetches the images and returns row `row`'s image and its file's path.
    func prefetchedImage(row: Int) throws -> (image: JSON, path: String) {
        _ = try call("prefetch", [("what", .string("images"))])
        let answer = try call("get_image", [("row", num(row))])
        guard let image = answer["image"], let path = image["path"]?.string else { throw HarnessError("row \(row) is not cached: \(answer)") }
        return (image, path)
    }

    /// Every object file under objects/.
    func objectFiles() throws -> [String] {
        let objects = store + "/objects"
        var out: [String] = []
        for fan in try FileManager.default.contentsOfDirectory(atPath: objects) {
            for name in try FileManager.default.contentsOfDirectory(atPath: objects + "/" + fan) { out.append(fan + name) }
        }
        return out.sorted()
    }
}

/// Runs cachectl and captures its output.
struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

func cachectl(_ args: [String], socket: String) throws -> CLIResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: Paths.cachectl)
    p.arguments = ["--socket", socket] + args
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return CLIResult(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
}

extension JSON {
    var int: Int { Int(integer ?? -1) }
}

/// A JSON integer argument.
func num(_ n: Int) -> JSON { .number(String(n)) }

/// Runs `body(i)` for i in 0..<count on `count` threads of their own, released
/// together, and waits for all. (DispatchQueue.concurrentPerform may run
/// iterations one after another on a busy machine; these really overlap.)
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let start = DispatchSemaphore(value: 0)
    let finished = DispatchGroup()
    for i in 0..<count {
        finished.enter()
        let t = Thread {
            start.wait()
            body(i)
            finished.leave()
        }
        t.start()
    }
    for _ in 0..<count { start.signal() }
    finished.wait()
}

/// Runs a program to completion, its input from the file `stdin` if given;
/// its stdout and stderr together.
func runProgram(_ executable: String, _ arguments: [String], directory: String? = nil, stdin: String? = nil) throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    if let stdin { p.standardInput = FileHandle(forReadingAtPath: stdin) }
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let out = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: out, as: UTF8.self))
}
