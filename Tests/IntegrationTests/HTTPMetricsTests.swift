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
        // The prefetch that filled the store is the last one, and it succeeded.
        let finished = status["last_prefetch"]?["finished"]?.double ?? 0
        #expect(a.value("cached_last_prefetch_success") == "1" && a.value("cached_last_prefetch_timestamp_seconds") == String(Int64(finished)),
                "\(http)\n\(status)")
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
