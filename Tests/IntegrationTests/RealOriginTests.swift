import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Real web servers as origins (issue 10): nginx over HTTP/1.1 with gzip,
/// Caddy over HTTPS with its internal CA and HTTP/2, and three daemons
/// behind one shared nginx proxy_cache. What each server did is read from
/// its own access log. Apache, lighttpd and squid: InteropTests.
@Suite struct RealOriginTests {
    @Test func nginxRevalidatesAndNothingIsDownloadedTwice() throws {
        let nginx = try Nginx()
        try RefreshScenario(name: "nginx", files: nginx.files!, postsURL: nginx.postsURL, manifestURL: nginx.manifestURL,
                            log: nginx.accessLog, stop: { nginx.stop() }, proto: "HTTP/1.1").run()
    }

    @Test func caddyOverHTTPSWithItsInternalCA() throws {
        let caddy = try Caddy()
        try RefreshScenario(name: "caddy", files: caddy.files, postsURL: caddy.postsURL, manifestURL: caddy.manifestURL,
                            daemonArguments: ["--ca-file", caddy.caRoot], log: caddy.accessLog, stop: { caddy.stop() },
                            proto: "HTTP/2.0").run()
        #expect(!systemTrustHolds(caddy.caRoot), "skip_install_trust: Caddy's CA is not in the system store")
    }

    @Test func anUnknownCAIsRefusedNamingTheCertificateProblemAndCaFile() throws {
        let caddy = try Caddy()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", caddy.postsURL, "--images-url", caddy.manifestURL, "--retries", "0"])
        let json = try PrefetchRun(socket: daemon.socket)
        #expect(json.status == 6, "\(json.problems)")
        let message = json.answer["error"]?["message"]?.string ?? ""
        #expect(message.lowercased().contains("certificate"), "names the certificate problem: \(message)")
        #expect(message.contains("ca-file"), "names the setting that fixes it: \(message)")
        let text = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(text.status == 6)
        #expect(text.stderr.contains("ca-file") && text.stderr.lowercased().contains("certificate"), "\(text.stderr)")
        #expect(caddy.accessLog.entries().isEmpty, "no request got past the TLS handshake: \(caddy.accessLog.entries())")
        print("[real-origin] unknown CA: \(message)")
    }

    /// A ca-file that is not PEM, and one holding another CA: each message
    /// says which, as docs/operations.md "TLS and private CAs" promises.
    @Test func aWrongCaFileIsNamedForWhatIsWrongWithIt() throws {
        try requireInstalled("/usr/bin/openssl", package: "openssl")
        let caddy = try Caddy()
        let scratch = Scratch()
        let feeds = ["--posts-url", caddy.postsURL, "--images-url", caddy.manifestURL, "--retries", "0"]
        let garbage = scratch.path + "/garbage.pem"
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: garbage))
        let other = scratch.path + "/other.pem"
        let made = try runProgram("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", scratch.path + "/other.key",
                                                        "-out", other, "-days", "1", "-subj", "/CN=another CA"])
        try #require(made.status == 0, "openssl made a CA: \(made.output)")
        for (file, expected) in [(garbage, "could not load the trusted CA certificates from ca-file \(garbage)"),
                                 (other, "the configured ca-file/ca-path does not include the CA that signed it")] {
            let daemon = try Daemon(origin: nil, arguments: feeds + ["--ca-file", file], scratch: Scratch())
            let r = try PrefetchRun(socket: daemon.socket)
            let message = r.answer["error"]?["message"]?.string ?? ""
            #expect(r.status == 6 && message.contains(expected), "\(file): \(message)")
        }
    }

    /// ca-path (a hashed directory), the configuration file and the environment.
    @Test func theCAIsTrustedThroughCaPathTheConfigFileAndTheEnvironment() throws {
        try requireInstalled("/usr/bin/openssl", package: "openssl")
        let caddy = try Caddy()
        let scratch = Scratch()
        let feeds = ["--posts-url", caddy.postsURL, "--images-url", caddy.manifestURL, "--retries", "0"]

        let hashed = scratch.path + "/ca"
        try FileManager.default.createDirectory(atPath: hashed, withIntermediateDirectories: true)
        let hash = try runProgram("/usr/bin/openssl", ["x509", "-hash", "-noout", "-in", caddy.caRoot])
        #expect(hash.status == 0, "\(hash.output)")
        try FileManager.default.copyItem(atPath: caddy.caRoot, toPath: hashed + "/" + hash.output.trimmingCharacters(in: .whitespacesAndNewlines) + ".0")
        let config = scratch.path + "/cached.conf"
        try "# a private CA\nca-file = \(caddy.caRoot)\n".write(toFile: config, atomically: true, encoding: .utf8)

        let ways: [(String, [String], [String: String])] = [
            ("--ca-path", ["--ca-path", hashed], [:]),
            ("ca-file in --config", ["--config", config], [:]),
            ("CACHED_CA_FILE", [], ["CACHED_CA_FILE": caddy.caRoot]),
        ]
        for (way, args, env) in ways {
            let daemon = try Daemon(origin: nil, arguments: feeds + args, environment: env)
            let r = try PrefetchRun(socket: daemon.socket, ["posts"])
            #expect(r.status == 0 && r.posts?["fetched"]?.int == 100, "\(way): \(r.problems)")
        }
        #expect(caddy.accessLog.entries().map(\.status) == [200, 200, 200])
    }

    /// Issue 10, item 8 and docs/operations.md "Many hosts behind a shared
    /// HTTP cache": three daemons with their own stores, one nginx
    /// proxy_cache in front of an nginx origin that says how long its
    /// answers stay fresh (Cache-Control: max-age).
    @Test func threeHostsBehindOneSharedCache() throws {
        let valid = 5.0
        // The feeds expire; the images state no lifetime, so within the
        // test's minutes cached never revalidates them (images-revalidate-after).
        let origin = try Nginx(extra: "location ~ \\.json$ { expires \(Int(valid))s; }")
        let cache = try Nginx(cacheFor: origin, valid: Int(valid))
        let files = origin.files!
        let paths = try files.allPaths()
        let feedPaths = ["/images/manifest.json", "/posts.json"]
        let args = ["--posts-url", cache.postsURL, "--images-url", cache.manifestURL]
        let scratches = [Scratch(), Scratch(), Scratch()]
        var daemons = try scratches.map { try Daemon(origin: nil, arguments: args, scratch: $0) }
        var originSeen = 0, cacheSeen = 0
        /// When what the cache stored before `t` is stale: nginx counts
        /// freshness in whole seconds, so up to a second after max-age.
        func stale(after t: Date) -> Date { t.addingTimeInterval(valid + 1.2) }

        /// New entries of the origin's and the cache's logs.
        func logs(origin o: Int, cache c: Int) -> (origin: [AccessEntry], cache: [AccessEntry]) {
            let cacheNew = cache.accessLog.entries(after: cacheSeen, atLeast: c)
            let originNew = origin.accessLog.entries(after: originSeen, atLeast: o, timeout: o == 0 ? 0.2 : 8)
            originSeen += originNew.count
            cacheSeen += cacheNew.count
            return (originNew, cacheNew)
        }
        func sorted(_ e: [AccessEntry]) -> [String] { e.map { "\($0.path) \($0.status)" }.sorted() }
        func report(_ label: String, _ l: (origin: [AccessEntry], cache: [AccessEntry])) {
            print("[shared-cache] \(label): origin \(l.origin.count) requests: \(l.origin.map(\.description))")
            print("[shared-cache] \(label): cache \(l.cache.count) requests: \(l.cache.map(\.description))")
        }
        /// Every host prefetches in turn and downloads nothing.
        func revalidateAll(_ label: String) throws -> (origin: [AccessEntry], cache: [AccessEntry]) {
            for d in daemons {
                let r = try PrefetchRun(socket: d.socket)
                #expect(r.status == 0 && r.posts?["fetched"]?.int == 0 && r.images?["downloaded"]?.int == 0, "\(label): \(r.problems)")
            }
            return logs(origin: 0, cache: 6)
        }

        // 1. All three at once, on empty stores: each URL reaches the origin once.
        let sockets = daemons.map(\.socket)
        let runs = Locked<[Int: PrefetchRun]>([:])
        let round1Start = Date()
        onThreads(3) { i in
            let r = try? PrefetchRun(socket: sockets[i])
            runs.withLock { $0[i] = r }
        }
        let round1 = Date()
        for i in 0..<3 {
            let r = runs.withLock { $0[i] }
            #expect(r?.status == 0 && r?.images?["downloaded"]?.int == 16 && r?.images?["failed"]?.int == 0, "host \(i): \(r?.problems ?? "no answer")")
        }
        let first = logs(origin: paths.count, cache: 3 * paths.count)
        report("3 hosts at once, empty stores", first)
        #expect(sorted(first.origin) == paths.map { "\($0) 200" }, "each URL reaches the origin once")
        #expect(sorted(first.cache) == paths.flatMap { p in Array(repeating: "\(p) 200", count: 3) })

        // 2. Within the validity period: 304s from the cache, nothing at the origin.
        let second = try revalidateAll("revalidation within max-age")
        report("3 hosts in turn, fresh", second)
        #expect(Date().timeIntervalSince(round1Start) < valid, "the machine was too slow to stay within the validity period")
        #expect(second.origin.isEmpty, "within max-age the cache answers: \(second.origin)")
        #expect(sorted(second.cache) == feedPaths.flatMap { p in Array(repeating: "\(p) 304", count: 3) })
        for e in second.cache {
            #expect(e.ifNoneMatch != nil && e.ifModifiedSince != nil && e.cacheStatus == "HIT", "\(e)")
        }

        // 3. Stale: the first host's requests make the cache revalidate once per URL.
        Thread.sleep(until: stale(after: round1))
        let round3 = Date()
        let third = try revalidateAll("revalidation after max-age")
        let revalidated = Date()
        report("3 hosts in turn, stale", third)
        #expect(sorted(third.origin) == feedPaths.map { "\($0) 304" }, "one conditional request per URL reaches the origin")
        for e in third.origin { #expect(e.ifNoneMatch != nil && e.ifModifiedSince != nil, "the cache revalidated with validators: \(e)") }
        #expect(sorted(third.cache) == feedPaths.flatMap { p in Array(repeating: "\(p) 304", count: 3) })
        #expect(third.cache.filter { $0.cacheStatus == "REVALIDATED" }.count == 2, "\(third.cache)")

        // 4. Every host restarts: nothing is downloaded, nothing reaches the origin.
        for i in 0..<3 {
            #expect(daemons[i].stop() == 0)
            daemons[i] = try Daemon(origin: nil, arguments: args, scratch: scratches[i])
        }
        let restarted = try revalidateAll("after a restart")
        report("3 hosts restarted", restarted)
        #expect(Date().timeIntervalSince(round3) < valid, "the machine was too slow to stay within the validity period")
        #expect(restarted.origin.isEmpty)
        #expect(sorted(restarted.cache) == feedPaths.flatMap { p in Array(repeating: "\(p) 304", count: 3) })

        // 5. An edit at the origin reaches every host within one validity
        // period, for one download from the origin.
        let title = "edited behind the shared cache"
        try files.edit("posts.json", replacing: "sunt aut facere repellat provident occaecati excepturi optio reprehenderit", with: title)
        Thread.sleep(until: stale(after: revalidated))
        for d in daemons {
            let r = try PrefetchRun(socket: d.socket)
            #expect(r.status == 0 && r.posts?["fetched"]?.int == 1 && r.images?["downloaded"]?.int == 0, "\(r.problems)")
            #expect(try cachectl(["get", "post", "1"], socket: d.socket).stdout.contains("Title: \(title)"))
        }
        let edited = logs(origin: 2, cache: 6)
        report("edit at the origin, stale", edited)
        #expect(sorted(edited.origin) == ["/images/manifest.json 304", "/posts.json 200"])
        #expect(sorted(edited.cache) == ["/images/manifest.json 304", "/images/manifest.json 304", "/images/manifest.json 304",
                                         "/posts.json 200", "/posts.json 200", "/posts.json 200"])

        // 5b. Another edit, and the three prefetch together (docs/operations.md):
        // the request that revalidates gets the edit; those answered from the
        // stale copy meanwhile (UPDATING) find the feed unchanged and get
        // the edit at their next prefetch.
        let title2 = "edited again, hosts prefetching together"
        try files.edit("posts.json", replacing: title, with: title2)
        Thread.sleep(until: stale(after: Date()))
        let together = Locked<[Int: PrefetchRun]>([:])
        onThreads(3) { i in
            let r = try? PrefetchRun(socket: sockets[i])
            together.withLock { $0[i] = r }
        }
        let gotIt = (0..<3).filter { together.withLock { $0 }[$0]?.posts?["fetched"]?.int == 1 }
        let firstRound = logs(origin: 1, cache: 6)
        report("edit, 3 hosts at once", firstRound)
        let updating = firstRound.cache.filter { $0.path == "/posts.json" && $0.cacheStatus == "UPDATING" }.count
        print("[shared-cache] edit, 3 hosts at once: \(gotIt.count) got it, \(updating) answered from the stale copy")
        #expect(!gotIt.isEmpty && gotIt.count + updating == 3, "got it: \(gotIt), UPDATING: \(updating)")
        for i in 0..<3 {
            let r = try PrefetchRun(socket: daemons[i].socket)
            #expect(r.posts?["fetched"]?.int == (gotIt.contains(i) ? 0 : 1), "host \(i), next round: \(r.problems)")
            #expect(try cachectl(["get", "post", "1"], socket: daemons[i].socket).stdout.contains("Title: \(title2)"))
        }
        _ = logs(origin: 0, cache: 6)
        let round5 = Date()

        // 6. The origin goes down: the cache answers from its stale copy,
        // in full (nginx 1.22 answers 200, not 304, with a copy it could
        // not revalidate); the hosts find it unchanged.
        origin.stop()
        Thread.sleep(until: stale(after: round5))
        let down = try revalidateAll("origin down")
        report("origin down, stale", down)
        #expect(sorted(down.cache) == feedPaths.flatMap { p in Array(repeating: "\(p) 200", count: 3) })
        #expect(down.cache.allSatisfy { $0.ifNoneMatch != nil && $0.ifModifiedSince != nil },
                "every host still sends both validators: \(down.cache.map(\.description))")
        #expect(down.cache.allSatisfy { $0.cacheStatus == "STALE" }, "\(down.cache)")

        // Over the whole run each image crossed the origin's wire once.
        cache.stop()
        let all = origin.accessLog.entries()
        for p in paths where !feedPaths.contains(p) { #expect(all.filter { $0.path == p }.count == 1, "\(p)") }
        #expect(all.count == originSeen && cache.accessLog.entries().count == cacheSeen, "no late requests")
    }
}

/// Whether a file in the system trust store sources holds `pem`'s certificate.
func systemTrustHolds(_ pem: String) -> Bool {
    guard let ca = try? String(contentsOfFile: pem, encoding: .utf8) else { return false }
    let body = ca.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    for dir in ["/usr/local/share/ca-certificates", "/etc/ssl/certs"] {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            guard let text = try? String(contentsOfFile: dir + "/" + name, encoding: .utf8) else { continue }
            if text.split(separator: "\n").filter({ !$0.hasPrefix("-----") }).joined().contains(body) { return true }
        }
    }
    return false
}

/// What every real origin must do for cached, asserted from the log of the
/// server the daemon talks to (`log`): a first prefetch downloads each URL
/// once; the 2nd and 3rd revalidate both feeds (304) with the validators the
/// server sent and download nothing; so does a prefetch after a restart; an
/// edited posts.json is fetched and served; every image is byte-identical to
/// the origin's file. Every prefetch exits 0 with no failed rows.
struct RefreshScenario {
    var name: String
    var files: OriginFiles
    var postsURL: String
    var manifestURL: String
    var daemonArguments: [String] = []
    var log: AccessLog
    /// Stops the server (which flushes its log) for the final count.
    var stop: () -> Void
    /// The protocol every request must have used, as the log spells it.
    var proto: String? = nil
    /// Whether the first answer for posts.json was compressed.
    var gzip = true
    /// The status a revalidation gets: 304, or 200 from a server that does
    /// not match its own validators.
    var revalidationStatus = 304
    /// A server that answers its own ETag in If-None-Match with 200 (Apache's
    /// mod_deflate by default): the first revalidation gets 200s, after which
    /// cached sends If-Modified-Since alone and gets 304s.
    var ignoresItsOwnETags = false
    /// Whether the log shows the ETag and Last-Modified the server sent.
    var logsValidators = true

    /// Per phase, the requests as the log showed them (for the issue's note).
    func run() throws {
        let scratch = Scratch()
        let args = ["--posts-url", postsURL, "--images-url", manifestURL] + daemonArguments
        var daemon = try Daemon(origin: nil, arguments: args, scratch: scratch)
        let paths = try files.allPaths()
        var seen = 0
        var served: [String: AccessEntry] = [:]

        func phase(_ label: String, _ expected: [String]) -> [AccessEntry] {
            let new = log.entries(after: seen, atLeast: expected.count)
            seen += new.count
            print("[real-origin] \(name) \(label): \(new.count) requests: \(new.map(\.description))")
            #expect(new.map { "\($0.path) \($0.status)" }.sorted() == expected.sorted(), "\(name) \(label): \(new)")
            if let proto { for e in new { #expect(e.proto == proto, "\(name) \(label): \(e.line)") } }
            return new
        }
        func expectClean(_ r: PrefetchRun, _ label: String) {
            #expect(r.status == 0, "\(name) \(label): \(r.problems)")
            #expect(r.answer["ok"] == .bool(true) && r.images?["failed"]?.int == 0 && r.answer["failures"]?.array?.isEmpty == true,
                    "\(name) \(label): \(r.problems)")
        }
        var etagsDropped = false
        /// A revalidation sends back exactly what the server sent.
        func expectValidators(_ entries: [AccessEntry], _ label: String) {
            for e in entries {
                #expect(e.ifNoneMatch != nil || e.ifModifiedSince != nil, "\(name) \(label): a conditional request: \(e.line)")
                guard logsValidators, let sent = served[e.path] else { continue }
                #expect(e.ifNoneMatch == (etagsDropped ? nil : sent.etag), "\(name) \(label): If-None-Match is the ETag sent: \(e.line) / \(sent.line)")
                #expect(e.ifModifiedSince == sent.lastModified, "\(name) \(label): If-Modified-Since is the Last-Modified sent: \(e.line) / \(sent.line)")
            }
        }
        func revalidate(_ label: String, status: Int? = nil) throws {
            let r = try PrefetchRun(socket: daemon.socket)
            expectClean(r, label)
            #expect(r.posts?["fetched"]?.int == 0 && r.posts?["unchanged"]?.int == 100, "\(name) \(label): \(r.problems)")
            #expect(r.images?["downloaded"]?.int == 0 && r.images?["cached"]?.int == 16, "\(name) \(label): nothing downloaded: \(r.problems)")
            let expected = status ?? revalidationStatus
            let entries = phase(label, ["/posts.json \(expected)", "/images/manifest.json \(expected)"])
            expectValidators(entries, label)
            for e in entries where e.status == 200 { served[e.path] = e }
        }

        let first = try PrefetchRun(socket: daemon.socket)
        expectClean(first, "prefetch 1")
        #expect(first.posts?["fetched"]?.int == 100 && first.images?["downloaded"]?.int == 16, "\(name): \(first.problems)")
        for e in phase("prefetch 1", paths.map { "\($0) 200" }) { served[e.path] = e }
        if gzip { #expect(served["/posts.json"]?.contentEncoding == "gzip", "\(name): posts.json compressed: \(served["/posts.json"]?.line ?? "")") }

        if ignoresItsOwnETags {
            // The server answers its own ETag with 200: cached notices, and
            // from then on revalidates with Last-Modified alone (304s).
            try revalidate("prefetch 2", status: 200)
            etagsDropped = true
            try revalidate("prefetch 3", status: 304)
        } else {
            try revalidate("prefetch 2")
            try revalidate("prefetch 3")
        }

        #expect(daemon.stop() == 0)
        daemon = try Daemon(origin: nil, arguments: args, scratch: scratch)
        try revalidate("prefetch after a restart", status: ignoresItsOwnETags ? 304 : nil)

        let title = "edited at the \(name) origin"
        try files.edit("posts.json", replacing: "sunt aut facere repellat provident occaecati excepturi optio reprehenderit", with: title)
        let edited = try PrefetchRun(socket: daemon.socket)
        expectClean(edited, "prefetch after an edit")
        #expect(edited.posts?["fetched"]?.int == 1 && edited.posts?["unchanged"]?.int == 99 && edited.images?["downloaded"]?.int == 0,
                "\(name) after an edit: \(edited.problems)")
        let after = phase("prefetch after an edit", ["/posts.json 200", "/images/manifest.json \(ignoresItsOwnETags ? 304 : revalidationStatus)"])
        expectValidators(after.filter { $0.path == "/images/manifest.json" }, "prefetch after an edit")
        for e in after where e.status == 200 { served[e.path] = e }
        // The edited feed's new validators are the ones sent next (a 304
        // echoing the ETag before the edit must not have changed that).
        try revalidate("prefetch after the edit, again", status: ignoresItsOwnETags ? 304 : nil)
        let post = try cachectl(["get", "post", "1"], socket: daemon.socket)
        #expect(post.status == 0 && post.stdout.contains("Title: \(title)"), "\(name): \(post.stdout) \(post.stderr)")

        for (row, file) in try files.imageFiles().enumerated() {
            let out = scratch.path + "/row\(row)"
            let r = try cachectl(["get", "image", String(row), "-o", out], socket: daemon.socket)
            #expect(r.status == 0, "\(name) row \(row): \(r.stderr)")
            let got = (try? Data(contentsOf: URL(fileURLWithPath: out))).map { Array($0) }
            #expect(got == (try files.bytes(file)), "\(name) row \(row) (\(file)) is byte-identical to the origin's file")
        }

        #expect(daemon.stop() == 0)
        stop()
        let all = log.entries()
        #expect(all.count == seen, "\(name): no requests beyond the prefetches: \(all.dropFirst(seen).map(\.description))")
        #expect(all.allSatisfy { $0.status == 200 || $0.status == 304 }, "\(name): \(all.filter { $0.status != 200 && $0.status != 304 }.map(\.line))")
        for p in paths where !p.hasSuffix(".json") {
            #expect(all.filter { $0.path == p }.count == 1, "\(name): \(p) downloaded once")
        }
    }
}
