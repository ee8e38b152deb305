import Foundation
import CacheProtocol

// Real web servers from Debian (nginx, Caddy, Apache, lighttpd, squid) as
// origins and proxies for the integration tests. Each runs as an ordinary
// process on 127.0.0.1 with a configuration written from a template in
// Tests/Fixtures/servers/ into a scratch directory; nothing is installed,
// enabled or left running. A missing server is a failure that says which
// package to install, never a skipped test.

/// Fails, with the reason printed, when `executable` is not installed.
func requireInstalled(_ executable: String, package: String) throws {
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        let reason = "\(executable) is not installed: apt-get install \(package) (make test and make interop install it)"
        print("RealServers: \(reason)")
        throw HarnessError(reason)
    }
}

/// A TCP port on 127.0.0.1 that nothing was bound to a moment ago (the
/// kernel's choice for port 0). Servers started on it are checked to own it,
/// and started again on another one if they lost a race for it.
func unusedLocalPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
    }
    guard ok else { throw HarnessError("bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// glibc's posix_spawn_file_actions_addclosefrom_np (2.34), which Swift's
/// Glibc module does not export (it is a GNU extension).
private let closeFromAction: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(nil /* RTLD_DEFAULT */, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// A server process in a process group of its own (so its workers and
/// helpers go with it), its stdout and stderr in a file. SIGTERM to the
/// group at the end, then SIGKILL after a grace period; always on deinit.
final class ServerProcess {
    let name: String
    let pid: pid_t
    let outputPath: String
    private var exitStatus: Int32?
    private var swept = false

    init(name: String, executable: String, arguments: [String], environment: [String: String]? = nil,
         outputPath: String) throws {
        self.name = name
        self.outputPath = outputPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the test runner's (a cachectl pipe of another
        // test, say) may stay open in a server that outlives it.
        guard let closeFrom = closeFromAction else { throw HarnessError("posix_spawn_file_actions_addclosefrom_np is missing (glibc < 2.34)") }
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2, SIGWINCH] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw HarnessError("\(name): cannot start \(executable): \(String(cString: strerror(rc)))") }
        pid = child
    }

    deinit { stop() }

    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == 0 { return true }
        exitStatus = r == pid ? status : -1
        return false
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// How it ended, for messages.
    var exitStatusText: String { exitStatus.map { "\($0)" } ?? "unknown" }

    /// Stops the whole group: `signal` first (servers flush their logs on
    /// it), SIGKILL after `grace` seconds. Idempotent.
    func stop(signal: Int32 = SIGTERM, grace: Double = 5) {
        if isRunning {
            kill(-pid, signal)
            if !waitUntil(grace, { !isRunning }) {
                kill(-pid, SIGKILL)
                var status: Int32 = 0
                if waitpid(pid, &status, 0) == pid { exitStatus = status }
            }
        }
        // Workers or helpers that outlived their parent (once: the group's
        // id is free for reuse afterwards).
        if !swept { kill(-pid, SIGKILL) }
        swept = true
    }

    /// Whether this process has a socket listening on 127.0.0.1:`port`
    /// (from /proc: the listening socket's inode among its descriptors).
    func listens(on port: Int) -> Bool {
        // Read to the end: the table is generated as it is read, and with
        // thousands of sockets (a soak beside) a one-shot read may stop short.
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return false }
        defer { try? handle.close() }
        let table = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        let local = String(format: "0100007F:%04X", port)
        var inodes: Set<String> = []
        for line in table.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            if f.count > 9, f[1] == local, f[3] == "0A" { inodes.insert("socket:[\(f[9])]") }
        }
        guard !inodes.isEmpty, let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
        return fds.contains { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")).map(inodes.contains) ?? false
        }
    }

    /// Starts a server with `launch(port)` on a fresh port until it listens
    /// there; another attempt with another port whenever it did not. (The
    /// port is free when chosen, but any process binding port 0 meanwhile,
    /// such as another test's origin, may take it; servers that log to a
    /// file say so only there, so every failure gets another port.)
    static func startListening(_ name: String, attempts: Int = 5, timeout: Double = 20, logs: [String] = [],
                               _ launch: (Int) throws -> ServerProcess) throws -> (process: ServerProcess, port: Int) {
        var tries: [String] = []
        for _ in 0..<attempts {
            let port = try unusedLocalPort()
            let started = Date()
            let p = try launch(port)
            if waitUntil(timeout, { p.listens(on: port) || !p.isRunning }) && p.isRunning { return (p, port) }
            let state = p.isRunning ? "still running, not listening" : "exited (status \(p.exitStatusText))"
            let seconds = Date().timeIntervalSince(started)
            p.stop()
            // Servers that log to a file say why only there.
            let logged = logs.map { path in "\(path): " + String(((try? String(contentsOfFile: path, encoding: .utf8)) ?? "(none)").suffix(800)) }
            tries.append("port \(port), \(state) after \(String(format: "%.1f", seconds)) s; output: \(p.output.suffix(800)) \(logged.joined(separator: "; "))")
        }
        throw HarnessError("\(name) did not start listening on 127.0.0.1: " + tries.joined(separator: " | "))
    }
}

/// One request as a server's access log recorded it.
struct AccessEntry: CustomStringConvertible {
    var method: String
    /// The path and query, also for a proxy's absolute request URLs.
    var path: String
    var status: Int
    var bytes: Int
    var ifNoneMatch: String?
    var ifModifiedSince: String?
    var etag: String?
    var lastModified: String?
    var contentEncoding: String?
    var proto: String
    /// The proxy's or cache's own word (squid `TCP_MISS/HIER_DIRECT`, nginx `HIT`).
    var cacheStatus: String?
    var line: String

    var description: String {
        var s = "\(method) \(path) \(status) \(bytes)B"
        if let ifNoneMatch { s += " INM=\(ifNoneMatch)" }
        if let ifModifiedSince { s += " IMS=\(ifModifiedSince)" }
        if let contentEncoding { s += " \(contentEncoding)" }
        if let cacheStatus { s += " [\(cacheStatus)]" }
        return s
    }

    /// What a server writes for a header that is absent.
    private static func field(_ v: JSON?) -> String? {
        guard let s = v?.string, !s.isEmpty, s != "-" else { return nil }
        return s
    }

    private static func pathOf(_ uri: String) -> String {
        guard let scheme = uri.range(of: "://") else { return uri }
        let rest = uri[scheme.upperBound...]
        return rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
    }

    /// The flat format of the nginx, Apache, lighttpd and squid templates.
    static func flat(_ line: String) -> AccessEntry {
        guard let j = try? JSONParser.parse(Array(line.utf8)) else {
            return AccessEntry(method: "?", path: "?", status: -1, bytes: 0, proto: "?", line: line)
        }
        return AccessEntry(method: j["method"]?.string ?? "", path: pathOf(j["uri"]?.string ?? ""), status: j["status"].map(\.int) ?? -1,
                           bytes: j["bytes"].map(\.int) ?? 0, ifNoneMatch: field(j["inm"]), ifModifiedSince: field(j["ims"]),
                           etag: field(j["etag"]), lastModified: field(j["lm"]), contentEncoding: field(j["ce"]),
                           proto: j["proto"]?.string ?? "", cacheStatus: field(j["squid"]) ?? field(j["cache"]), line: line)
    }

    /// Caddy's JSON access log: request headers under request.headers, the
    /// response's under resp_headers, each a list of values.
    static func caddy(_ line: String) -> AccessEntry {
        guard let j = try? JSONParser.parse(Array(line.utf8)), let r = j["request"] else {
            return AccessEntry(method: "?", path: "?", status: -1, bytes: 0, proto: "?", line: line)
        }
        func header(_ h: JSON?, _ name: String) -> String? { field(h?[name]?.array?.first) }
        return AccessEntry(method: r["method"]?.string ?? "", path: r["uri"]?.string ?? "", status: j["status"].map(\.int) ?? -1,
                           bytes: j["size"].map(\.int) ?? 0, ifNoneMatch: header(r["headers"], "If-None-Match"),
                           ifModifiedSince: header(r["headers"], "If-Modified-Since"), etag: header(j["resp_headers"], "Etag"),
                           lastModified: header(j["resp_headers"], "Last-Modified"),
                           contentEncoding: header(j["resp_headers"], "Content-Encoding"), proto: r["proto"]?.string ?? "",
                           cacheStatus: nil, line: line)
    }
}

/// A server's access log, one JSON object a line.
struct AccessLog {
    let path: String
    let parse: (String) -> AccessEntry

    func entries() -> [AccessEntry] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { parse(String($0)) }
    }

    /// The entries after the first `offset`, once there are at least
    /// `count` of them, or all there are after `timeout` (a server may
    /// write its log line just after the answer, squid and lighttpd through
    /// another process).
    func entries(after offset: Int, atLeast count: Int, timeout: Double = 8) -> [AccessEntry] {
        var new: [AccessEntry] = []
        _ = waitUntil(timeout) {
            new = Array(entries().dropFirst(offset))
            return new.count >= count
        }
        return new
    }
}

/// Where the template files are.
extension Paths {
    static var serverTemplates: String { packageRoot + "/Tests/Fixtures/servers" }
}

/// Writes `template` from Tests/Fixtures/servers with each `@KEY@` replaced.
func writeConfig(_ template: String, to path: String, _ values: [String: String]) throws {
    var text = try String(contentsOfFile: Paths.serverTemplates + "/" + template, encoding: .utf8)
    for (k, v) in values { text = text.replacingOccurrences(of: "@\(k)@", with: v) }
    if let left = text.range(of: #"@[A-Z_]+@"#, options: .regularExpression) {
        throw HarnessError("\(template): no value for \(text[left])")
    }
    try text.write(toFile: path, atomically: true, encoding: .utf8)
}

var runningAsRoot: Bool { getuid() == 0 }

/// A self-signed certificate for 127.0.0.1 and its key, made by openssl in `directory`.
func selfSignedCertificate(in directory: String) throws -> (certificate: String, key: String) {
    try requireInstalled("/usr/bin/openssl", package: "openssl")
    let certificate = directory + "/cert.pem", key = directory + "/key.pem"
    let r = try runProgram("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                                "-subj", "/CN=127.0.0.1", "-days", "1", "-keyout", key, "-out", certificate])
    guard r.status == 0 else { throw HarnessError("openssl req: \(r.output)") }
    chmod(key, 0o644)
    return (certificate, key)
}

/// A private copy of Examples/origin (posts.json, images/) that a server
/// serves and a test may edit. Every file is dated an hour ago, so that
/// Last-Modified is in the past and one-second resolution cannot hide an
/// edit (an edit dates the file later, still in the past).
final class OriginFiles {
    let root: String
    private var edits = 0

    init(at root: String) throws {
        self.root = root
        try FileManager.default.copyItem(atPath: Paths.exampleOrigin, toPath: root)
        let old = Date().addingTimeInterval(-3600)
        for rel in ["", "images"] + (try FileManager.default.subpathsOfDirectory(atPath: root)) {
            let path = rel.isEmpty ? root : root + "/" + rel
            var isDir: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
            chmod(path, isDir.boolValue ? 0o755 : 0o644)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
    }

    /// The image file of each manifest row, in row order.
    func imageFiles() throws -> [String] {
        let manifest = try JSONParser.parse(Array(Data(contentsOf: URL(fileURLWithPath: root + "/images/manifest.json"))))
        return (manifest.array ?? []).map { "images/" + ($0["url"]?.string ?? "") }
    }

    /// Every URL path a full prefetch asks for: the two feeds and each image once.
    func allPaths() throws -> [String] {
        Array(Set(["/posts.json", "/images/manifest.json"] + (try imageFiles()).map { "/" + $0 })).sorted()
    }

    func bytes(_ relative: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative)))
    }

    /// Replaces `old` by `new` in a file, dated later than before.
    func edit(_ relative: String, replacing old: String, with new: String) throws {
        let path = root + "/" + relative
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard text.contains(old) else { throw HarnessError("\(relative) has no \(old)") }
        try text.replacingOccurrences(of: old, with: new).write(toFile: path, atomically: false, encoding: .utf8)
        edits += 1
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-3000 + Double(60 * edits))], ofItemAtPath: path)
    }
}

/// A web server serving an OriginFiles copy, or a proxy in front of one.
protocol RealServer: AnyObject {
    var name: String { get }
    var port: Int { get }
    /// The URL prefix of the feeds (http://127.0.0.1:PORT or https://...).
    var base: String { get }
    var accessLog: AccessLog { get }
    var process: ServerProcess { get }
}

extension RealServer {
    var postsURL: String { base + "/posts.json" }
    var manifestURL: String { base + "/images/manifest.json" }
    func stop() { process.stop() }
}

/// A scratch directory the servers' unprivileged workers (www-data, proxy)
/// can enter when the tests run as root.
private func serverScratch() -> Scratch {
    let s = Scratch()
    chmod(s.path, 0o755)
    return s
}

final class Nginx: RealServer {
    static let executable = "/usr/sbin/nginx"
    let name: String
    let scratch = serverScratch()
    let files: OriginFiles?
    let process: ServerProcess
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }
    var accessLog: AccessLog { AccessLog(path: scratch.path + "/access.log", parse: AccessEntry.flat) }

    /// An origin serving a copy of Examples/origin; `extra` goes into its server block.
    convenience init(extra: String = "") throws {
        try self.init(name: "nginx", template: "nginx-origin.conf", files: true, values: ["EXTRA": extra])
    }

    /// The shared cache in front of `origin`.
    convenience init(cacheFor origin: Nginx, valid seconds: Int) throws {
        try self.init(name: "nginx proxy_cache", template: "nginx-cache.conf", files: false,
                      values: ["ORIGIN": "127.0.0.1:\(origin.port)", "VALID": String(seconds)])
    }

    /// A reverse proxy in front of cached's HTTP front-end on the Unix socket
    /// `path`; with `tls`, over HTTPS with a self-signed certificate for 127.0.0.1.
    convenience init(proxyingUnixSocket path: String, tls: Bool = false) throws {
        try self.init(name: "nginx reverse proxy", template: "nginx-http-proxy.conf", files: false,
                      values: ["SOCKET": path, "SSL": "", "CERTIFICATE": ""], tls: tls)
    }

    /// With `tls`, a certificate for 127.0.0.1 fills the template's SSL and CERTIFICATE.
    private init(name: String, template: String, files: Bool, values: [String: String], tls: Bool = false) throws {
        try requireInstalled(Self.executable, package: "nginx-light")
        self.name = name
        let dir = scratch.path
        var values = values
        if tls {
            let (certificate, key) = try selfSignedCertificate(in: dir)
            values["SSL"] = " ssl"
            values["CERTIFICATE"] = "ssl_certificate \(certificate); ssl_certificate_key \(key);"
        }
        self.files = files ? try OriginFiles(at: dir + "/root") : nil
        for t in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            try FileManager.default.createDirectory(atPath: "\(dir)/tmp/\(t)", withIntermediateDirectories: true)
        }
        let conf = dir + "/nginx.conf"
        (process, port) = try ServerProcess.startListening(name, logs: [dir + "/error.log"]) { port in
            try writeConfig(template, to: conf, values.merging(["DIR": dir, "PORT": String(port), "ROOT": dir + "/root",
                                                                "USER": runningAsRoot ? "user root;" : ""]) { a, _ in a })
            return try ServerProcess(name: name, executable: Self.executable,
                                     arguments: ["-e", dir + "/error.log", "-p", dir, "-c", conf, "-g", "daemon off; pid \(dir)/nginx.pid;"],
                                     outputPath: dir + "/output.log")
        }
    }

    deinit { process.stop() }
}

final class Caddy: RealServer {
    static let executable = "/usr/bin/caddy"
    let name = "caddy"
    let scratch = serverScratch()
    let files: OriginFiles
    let process: ServerProcess
    let port: Int
    var base: String { "https://127.0.0.1:\(port)" }
    var accessLog: AccessLog { AccessLog(path: scratch.path + "/access.log", parse: AccessEntry.caddy) }
    /// The root of Caddy's internal CA, which signs its certificate.
    var caRoot: String { scratch.path + "/data/caddy/pki/authorities/local/root.crt" }

    init() throws {
        try requireInstalled(Self.executable, package: "caddy")
        let dir = scratch.path
        files = try OriginFiles(at: dir + "/root")
        let conf = dir + "/Caddyfile"
        // Its own HOME and XDG directories: the CA, certificates and
        // autosaved configuration stay in the scratch directory.
        let env = ["PATH": "/usr/bin:/bin", "HOME": dir + "/home", "XDG_DATA_HOME": dir + "/data", "XDG_CONFIG_HOME": dir + "/config"]
        (process, port) = try ServerProcess.startListening("caddy", logs: [dir + "/caddy.log"]) { port in
            try writeConfig("Caddyfile", to: conf, ["DIR": dir, "PORT": String(port), "ROOT": dir + "/root"])
            return try ServerProcess(name: "caddy", executable: Self.executable,
                                     arguments: ["run", "--config", conf, "--adapter", "caddyfile"],
                                     environment: env, outputPath: dir + "/output.log")
        }
        // The certificate is issued right after the listener starts.
        let certificate = dir + "/data/caddy/certificates/local/127.0.0.1/127.0.0.1.crt"
        guard waitUntil(20, { FileManager.default.fileExists(atPath: caRoot) && FileManager.default.fileExists(atPath: certificate) }) else {
            throw HarnessError("caddy issued no certificate: \((try? String(contentsOfFile: dir + "/caddy.log", encoding: .utf8)) ?? "")")
        }
    }

    deinit { process.stop() }
}

final class Apache: RealServer {
    static let executable = "/usr/sbin/apache2"
    let name: String
    let scratch = serverScratch()
    let files: OriginFiles
    let process: ServerProcess
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }
    var accessLog: AccessLog { AccessLog(path: scratch.path + "/access.log", parse: AccessEntry.flat) }

    /// `deflateAlterETag`: nil for mod_deflate's default (AddSuffix), or
    /// Remove / NoChange.
    init(deflateAlterETag: String? = nil) throws {
        try requireInstalled(Self.executable, package: "apache2")
        name = "apache2" + (deflateAlterETag.map { " (DeflateAlterETag \($0))" } ?? "")
        let dir = scratch.path
        files = try OriginFiles(at: dir + "/root")
        try FileManager.default.createDirectory(atPath: dir + "/run", withIntermediateDirectories: true)
        let conf = dir + "/apache2.conf"
        (process, port) = try ServerProcess.startListening(name) { port in
            try writeConfig("apache2.conf", to: conf, ["DIR": dir, "PORT": String(port), "ROOT": dir + "/root",
                                                       "USER": runningAsRoot ? "User www-data\nGroup www-data" : "",
                                                       "DEFLATE_ETAG": deflateAlterETag.map { "DeflateAlterETag \($0)" } ?? ""])
            // Without APACHE_* variables: this configuration names every path itself.
            return try ServerProcess(name: "apache2", executable: Self.executable, arguments: ["-f", conf, "-DFOREGROUND"],
                                     environment: ["PATH": "/usr/sbin:/usr/bin:/bin", "LANG": "C"], outputPath: dir + "/output.log")
        }
    }

    deinit { process.stop() }
}

final class Lighttpd: RealServer {
    static let executable = "/usr/sbin/lighttpd"
    let name = "lighttpd"
    let scratch = serverScratch()
    let files: OriginFiles
    let process: ServerProcess
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }
    var accessLog: AccessLog { AccessLog(path: scratch.path + "/access.log", parse: AccessEntry.flat) }

    init() throws {
        try requireInstalled(Self.executable, package: "lighttpd")
        let dir = scratch.path
        files = try OriginFiles(at: dir + "/root")
        let conf = dir + "/lighttpd.conf"
        (process, port) = try ServerProcess.startListening("lighttpd") { port in
            try writeConfig("lighttpd.conf", to: conf, ["DIR": dir, "PORT": String(port), "ROOT": dir + "/root"])
            return try ServerProcess(name: "lighttpd", executable: Self.executable, arguments: ["-D", "-f", conf], outputPath: dir + "/output.log")
        }
    }

    deinit { process.stop() }
}

/// squid as a forward proxy (cached's `proxy` setting points at it).
final class Squid {
    static let executable = "/usr/sbin/squid"
    let scratch = serverScratch()
    let process: ServerProcess
    let port: Int
    var proxyURL: String { "http://127.0.0.1:\(port)" }
    var accessLog: AccessLog { AccessLog(path: scratch.path + "/access.log", parse: AccessEntry.flat) }

    init() throws {
        try requireInstalled(Self.executable, package: "squid")
        let dir = scratch.path
        let conf = dir + "/squid.conf"
        // Started as root, squid works as cache_effective_user (proxy): it
        // must own its directory to write its logs there.
        if runningAsRoot, let pw = getpwnam("proxy") {
            chown(dir, pw.pointee.pw_uid, pw.pointee.pw_gid)
            for f in ["access.log", "cache.log"] {
                _ = FileManager.default.createFile(atPath: dir + "/" + f, contents: nil)
                chown(dir + "/" + f, pw.pointee.pw_uid, pw.pointee.pw_gid)
            }
        }
        (process, port) = try ServerProcess.startListening("squid") { port in
            try writeConfig("squid.conf", to: conf, ["DIR": dir, "PORT": String(port)])
            return try ServerProcess(name: "squid", executable: Self.executable, arguments: ["-N", "-d", "1", "-f", conf],
                                     outputPath: dir + "/output.log")
        }
    }

    deinit { process.stop() }
}

/// `cachectl --json prefetch` and its answer.
struct PrefetchRun {
    var status: Int32
    var answer: JSON
    var stderr: String

    init(socket: String, _ args: [String] = []) throws {
        let r = try cachectl(["--json", "prefetch"] + args, socket: socket)
        status = r.status
        stderr = r.stderr
        answer = (try? JSONParser.parse(Array(r.stdout.utf8))) ?? .string(r.stdout)
    }

    var posts: JSON? { answer["posts"] }
    var images: JSON? { answer["images"] }
    /// Failed rows and the error answer, for expectation messages.
    var problems: String { "exit \(status), \(String(decoding: answer.encoded, as: UTF8.self)) \(stderr)" }
}
