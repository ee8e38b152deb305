import Foundation
import Testing
import CacheProtocol

/// `/metrics` over HTTP: what promtool accepts without a lint warning, the
/// same text as `cachectl metrics` (but for the values that change between
/// two calls), and what a real Prometheus server scrapes and can query.
/// promtool and prometheus missing are failures naming the package.
@Suite struct HTTPMetricsTests {
    /// Values that may differ between two reads a moment apart.
    static let moving: Set<String> = ["cached_uptime_seconds", "cached_requests_total", "cached_connections"]

    @Test func metricsPassPromtoolAndMatchCachectl() throws {
        try requireInstalled("/usr/bin/promtool", package: "prometheus")
        let (origin, daemon, port) = try Self.prefetchedDaemon()
        _ = origin
        let answer = try SimpleHTTP.get(port: port, path: "/metrics")
        try #require(answer.status == 200, "GET /metrics: \(answer.status) \(answer.text)")
        #expect(answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8", "\(answer.headers)")
        #expect(answer.headers["content-length"] == String(answer.body.count), "\(answer.headers)")
        let http = answer.text
        let cli = try cachectl(["metrics"], socket: daemon.socket)
        try #require(cli.status == 0, "cachectl metrics: \(cli.stderr)")

        // promtool: exit 0 and not a word, on stdin.
        let scratch = Scratch()
        let file = scratch.path + "/metrics.txt"
        try Data(answer.body).write(to: URL(fileURLWithPath: file))
        let lint = try runProgram("/usr/bin/promtool", ["check", "metrics"], stdin: file)
        print("[http-metrics] promtool check metrics: exit \(lint.status), output \"\(lint.output)\"")
        #expect(lint.status == 0 && lint.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
                "promtool check metrics: exit \(lint.status): \(lint.output)\n\(http)")

        // The same text as cachectl's: HELP and TYPE lines exactly, every
        // sample's name in the same order, and its value unless it moves.
        let a = Exposition(http), b = Exposition(cli.stdout)
        #expect(a.comments == b.comments, "HELP/TYPE lines:\nHTTP:\n\(http)\ncachectl:\n\(cli.stdout)")
        #expect(a.samples.map(\.name) == b.samples.map(\.name), "metric names:\nHTTP:\n\(http)\ncachectl:\n\(cli.stdout)")
        for (x, y) in zip(a.samples, b.samples) where x.name == y.name && !Self.moving.contains(x.name) {
            #expect(x.value == y.value, "\(x.name): \(x.value) over HTTP, \(y.value) from cachectl")
        }
        #expect(a.malformed.isEmpty && b.malformed.isEmpty, "lines neither comment nor sample: \(a.malformed) \(b.malformed)")
        #expect(a.value("cached_posts") == "100" && a.value("cached_images") == "16" && a.value("cached_images_cached") == "16",
                "after a full prefetch of Examples/origin:\n\(http)")
        let status = try daemon.call("status")
        #expect(a.value("cached_objects") == status["objects"].map { String($0.int) }, "objects: \(status)")
        #expect(a.value("cached_object_bytes") == status["bytes"].map { String($0.int) }, "bytes: \(status)")
        for s in a.samples { #expect(Int(s.value).map { $0 >= 0 } == true, "\(s.name) \(s.value) is a non-negative integer") }
    }

    @Test func prometheusScrapesTheDaemon() throws {
        try requireInstalled("/usr/bin/prometheus", package: "prometheus")
        let (origin, daemon, port) = try Self.prefetchedDaemon()
        _ = origin
        let posts = try daemon.call("status")["posts"]?.int ?? -1
        try #require(posts == 100, "the daemon stored the feed's 100 posts")

        let scratch = Scratch()
        let dir = scratch.path
        let config = dir + "/prometheus.yml"
        try """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1m
            scrape_configs:
              - job_name: cached
                static_configs:
                  - targets: ["127.0.0.1:\(port)"]

            """.write(toFile: config, atomically: true, encoding: .utf8)
        let started = Date()
        let (prometheus, webPort) = try ServerProcess.startListening("prometheus", timeout: 60) { webPort in
            try? FileManager.default.removeItem(atPath: dir + "/data")
            return try ServerProcess(name: "prometheus", executable: "/usr/bin/prometheus",
                                     arguments: ["--config.file=" + config, "--storage.tsdb.path=" + dir + "/data",
                                                 "--web.listen-address=127.0.0.1:\(webPort)", "--log.level=warn"],
                                     outputPath: dir + "/output.log")
        }
        defer { prometheus.stop(grace: 10) }
        print("[http-metrics] prometheus listening on 127.0.0.1:\(webPort) after \(String(format: "%.1f", Date().timeIntervalSince(started))) s")

        /// The single value of `query`, or what came instead.
        func query(_ q: String) -> (value: String?, raw: String) {
            let path = "/api/v1/query?query=" + (q.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? q)
            guard let r = try? SimpleHTTP.get(port: webPort, path: path), r.status == 200,
                  let j = try? JSONParser.parse(r.body), let result = j["data"]?["result"]?.array else {
                return (nil, "no answer")
            }
            return (result.count == 1 ? result[0]["value"]?.array?.last?.string : nil, r.text)
        }
        var up: (value: String?, raw: String) = (nil, "")
        let scraped = waitUntil(60) { up = query(#"up{job="cached"}"#); return up.value == "1" }
        let targets = (try? SimpleHTTP.get(port: webPort, path: "/api/v1/targets"))?.text ?? "(no answer)"
        try #require(scraped, "up{job=\"cached\"} never became 1: \(up.raw)\ntargets: \(targets)\nprometheus: \(prometheus.output.suffix(3000))")
        var stored: (value: String?, raw: String) = (nil, "")
        _ = waitUntil(30) { stored = query(#"cached_posts{job="cached"}"#); return stored.value != nil }
        #expect(stored.value == String(posts), "cached_posts: \(stored.raw)")
        var cachedImages: (value: String?, raw: String) = (nil, "")
        _ = waitUntil(30) { cachedImages = query(#"cached_images_cached{job="cached"}"#); return cachedImages.value != nil }
        #expect(cachedImages.value == "16", "cached_images_cached: \(cachedImages.raw)")
        #expect(targets.contains("\"health\":\"up\"") && targets.contains("\"lastError\":\"\""), "targets: \(targets)")
        print("[http-metrics] prometheus scraped up=1, cached_posts=\(stored.value ?? "none") after \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        prometheus.stop(grace: 10)
        #expect(!prometheus.isRunning)
    }

    /// A daemon with the HTTP front-end on a TCP port, after a full prefetch from nginx.
    static func prefetchedDaemon() throws -> (Nginx, Daemon, Int) {
        let nginx = try Nginx()
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                         "--http-listen", "127.0.0.1:\(port)"])
        let r = try cachectl(["prefetch"], socket: daemon.socket)
        try #require(r.status == 0, "cachectl prefetch: \(r.stderr)\n\(daemon.log.suffix(2000))")
        return (nginx, daemon, port)
    }
}

/// The text exposition format, line by line.
private struct Exposition {
    var comments: [String] = []
    var samples: [(name: String, value: String)] = []
    var malformed: [String] = []

    init(_ text: String) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) where !line.isEmpty {
            if line.hasPrefix("#") { comments.append(line); continue }
            let f = line.split(separator: " ")
            if f.count == 2 { samples.append((String(f[0]), String(f[1]))) } else { malformed.append(line) }
        }
    }

    func value(_ name: String) -> String? { samples.first { $0.name == name }?.value }
}

/// A GET over HTTP/1.0 (the server closes the connection after the answer),
/// bounded by a 15 s receive timeout.
enum SimpleHTTP {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func get(port: Int, path: String) throws -> Answer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw HarnessError("cannot connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw HarnessError("GET \(path): \(String(cString: strerror(errno))) after \(response.count) bytes") }
            if n == 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw HarnessError("GET \(path): no HTTP head in \(response.count) bytes") }
        let head = String(decoding: response[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = head.first?.split(separator: " ") ?? []
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw HarnessError("GET \(path): status line \(head.first ?? "")") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: Array(response[split.upperBound...]))
    }
}
