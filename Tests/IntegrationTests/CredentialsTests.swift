import Foundation
import Testing
import CacheProtocol

/// `fetch-header` and `fetch-header-file` with the real daemon and three
/// fault origins (three ports: three origins; the third also by another
/// host name): the headers reach the feeds' origin and nothing else, no
/// value shows anywhere, a refusal says what was sent, a reload changes them
/// (docs/operations.md, "Credentials").
@Suite struct CredentialsTests {
    static let token = "tok-\(UInt64.random(in: 1...UInt64.max))"
    static let apiKey = "key-\(UInt64.random(in: 1...UInt64.max))"

    /// A header file of the daemon's user, mode 0600, holding `lines`.
    static func headerFile(_ scratch: Scratch, _ lines: String, name: String = "feed-token") throws -> String {
        let file = scratch.path + "/" + name
        try lines.write(toFile: file, atomically: false, encoding: .utf8)
        #expect(chmod(file, 0o600) == 0)
        return file
    }

    /// The configured headers in one logged request (nil for each one absent).
    static func sent(_ r: Origin.LoggedRequest) -> [String?] {
        [r.headers["authorization"]?.joined(separator: ","), r.headers["x-api-key"]?.joined(separator: ",")]
    }

    /// Fails when `text` (what `place` shows) holds a secret.
    static func expectNoSecret(_ text: String, _ place: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!text.contains(token) && !text.contains(apiKey), "\(place) shows a secret: \(text)", sourceLocation: sourceLocation)
    }

    @Test func theHeadersGoToTheFeedsOriginAndNoValueShowsAnywhere() throws {
        let a = try Origin(), b = try Origin(), c = try Origin()
        try a.requireToken(Self.token)
        let auth = a.base + "/auth"
        // Rows on A (behind the token), on C (another host), and on A redirecting to B.
        try a.write("images/creds.json", """
            [{"url": "01-sunrise.png"}, {"url": "02-ocean.png"},
             {"url": "http://localhost:\(c.port)/images/04-desert.png"},
             {"url": "\(auth)/fault/redirect-to/\(b.port)/images/05-night.png"}]
            """)
        let scratch = Scratch()
        let file = try Self.headerFile(scratch, "# LoadCredential= would put it here\nAuthorization: Bearer \(Self.token)\n")
        let httpPort = try unusedLocalPort()
        let arguments = ["--posts-url", "\(auth)/fault/redirect-to/\(b.port)/posts.json", "--images-url", "\(auth)/images/creds.json",
                         "--fetch-header", "X-Api-Key: \(Self.apiKey)", "--fetch-header-file", file]
        let daemon = try Daemon(origin: nil, arguments: arguments + ["--http-listen", "127.0.0.1:\(httpPort)"], scratch: scratch)

        let prefetch = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(prefetch.status == 0, "\(prefetch.stderr) \(daemon.log)")
        #expect(try daemon.call("status")["images_cached"]?.int == 4)

        let onA = try a.requests()
        #expect(Set(onA.map(\.path)) == ["/auth/fault/redirect-to/\(b.port)/posts.json", "/auth/images/creds.json",
                                         "/auth/images/01-sunrise.png", "/auth/images/02-ocean.png",
                                         "/auth/fault/redirect-to/\(b.port)/images/05-night.png"])
        #expect(onA.allSatisfy { Self.sent($0) == ["Bearer \(Self.token)", Self.apiKey] }, "\(onA.map(\.headers))")
        let onB = try b.requests(), onC = try c.requests()
        #expect(Set(onB.map(\.path)) == ["/posts.json", "/images/05-night.png"], "the redirect targets")
        #expect(onC.map(\.path) == ["/images/04-desert.png"])
        #expect((onB + onC).allSatisfy { Self.sent($0) == [nil, nil] }, "another origin got \((onB + onC).map(\.headers))")

        #expect(daemon.log.contains("fetch-header: sending X-Api-Key, Authorization to http://127.0.0.1:\(a.port)"), "\(daemon.log)")
        Self.expectNoSecret(daemon.log, "the debug log")
        for command in [["status"], ["--json", "status"], ["metrics"], ["get", "images"]] {
            Self.expectNoSecret(try cachectl(command, socket: daemon.socket).stdout, "cachectl \(command.joined(separator: " "))")
        }
        for path in ["/metrics", "/images", "/"] { Self.expectNoSecret(try SimpleHTTP.get(port: httpPort, path: path).text, "GET \(path)") }
        let check = try runProgram(Paths.cached, ["--config", "/dev/null", "--check-config"] + arguments)
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("fetch-header X-Api-Key: <redacted>"), "\(check.output)")
        #expect(check.output.contains("fetch-header-file \(file) (Authorization: <redacted>)"), "\(check.output)")
        Self.expectNoSecret(check.output, "--check-config")
    }

    /// nginx as the origin, asking for the key and redirecting the posts
    /// feed (its redirect has an HTML body) to another origin, which gets none.
    @Test func nginxChecksTheKeyAndItsRedirectToAnotherOriginGetsNone() throws {
        let b = try Origin()
        let key = "if ($http_x_api_key != \"\(Self.apiKey)\") { return 401; }"
        let nginx = try Nginx(extra: """
            location = /private/moved.json { \(key) return 302 http://127.0.0.1:\(b.port)/posts.json; }
            location /private/ { \(key) rewrite ^/private/(.*)$ /$1 break; }
            """)
        let feeds = ["--posts-url", nginx.base + "/private/moved.json", "--images-url", nginx.base + "/private/images/manifest.json"]
        let bare = try Daemon(origin: nil, arguments: feeds)
        let refused = try cachectl(["prefetch", "posts"], socket: bare.socket)
        #expect(refused.stderr.contains("HTTP 401 Unauthorized: no fetch-header is configured for this origin (http://127.0.0.1:\(nginx.port))"),
                "\(refused.stderr)")

        let daemon = try Daemon(origin: nil, arguments: feeds + ["--fetch-header", "X-Api-Key: \(Self.apiKey)"])
        let run = try PrefetchRun(socket: daemon.socket)
        #expect(run.status == 0 && run.posts?["fetched"]?.int == 100 && run.images?["downloaded"]?.int == 16, "\(run.problems)")
        // The bare daemon's 401, then the posts feed's 302, the manifest and 16 images: no 401.
        let served = nginx.accessLog.entries(after: 0, atLeast: 19)
        #expect(served.first?.status == 401 && served.dropFirst().map(\.status).sorted() == Array(repeating: 200, count: 17) + [302], "\(served)")
        let onB = try b.requests()
        #expect(onB.map(\.path) == ["/posts.json"])
        #expect(onB.allSatisfy { Self.sent($0) == [nil, nil] }, "\(onB.map(\.headers))")
        Self.expectNoSecret(daemon.log, "the debug log")
    }

    /// nginx answering 403 (a key it does not take, or none): the refusal
    /// says whether credentials were configured and sent, as a 401's does.
    @Test func a403SaysWhetherCredentialsWereConfiguredAndSent() throws {
        let nginx = try Nginx(extra: """
            location /locked/ { if ($http_x_api_key != "\(Self.apiKey)") { return 403; } rewrite ^/locked/(.*)$ /$1 break; }
            """)
        let feeds = ["--posts-url", nginx.base + "/locked/posts.json"]
        let bare = try Daemon(origin: nil, arguments: feeds)
        let none = try cachectl(["prefetch", "posts"], socket: bare.socket)
        #expect(none.status == 6 && none.stderr.contains("HTTP 403 Forbidden: no fetch-header is configured for this origin "
                                                         + "(http://127.0.0.1:\(nginx.port))"), "\(none)")
        let wrong = try Daemon(origin: nil, arguments: feeds + ["--fetch-header", "X-Api-Key: not-\(Self.apiKey)"])
        let refused = try cachectl(["prefetch", "posts"], socket: wrong.socket)
        #expect(refused.status == 6 && refused.stderr.contains("HTTP 403 Forbidden: the origin refused the configured fetch-header "
                                                               + "credentials (X-Api-Key)"), "\(refused)")
        Self.expectNoSecret(refused.stderr + wrong.log, "the refusal")
        let right = try Daemon(origin: nil, arguments: feeds + ["--fetch-header", "X-Api-Key: \(Self.apiKey)"])
        #expect(try cachectl(["prefetch", "posts"], socket: right.socket).status == 0)
    }

    @Test func a401SaysWhetherCredentialsWereConfiguredAndSent() throws {
        let a = try Origin(), c = try Origin()
        try a.requireToken(Self.token)
        try c.requireToken(Self.token)
        let auth = a.base + "/auth"
        try a.write("images/creds.json", #"[{"url": "01-sunrise.png"}, {"url": "http://localhost:\#(c.port)/auth/images/02-ocean.png"}]"#)
        let feeds = ["--posts-url", "\(auth)/posts.json", "--images-url", a.base + "/images/creds.json"]

        let bare = try Daemon(origin: nil, arguments: feeds)
        let none = try cachectl(["prefetch", "posts"], socket: bare.socket)
        #expect(none.status != 0)
        #expect(none.stderr.contains("posts-url \(auth)/posts.json: HTTP 401 Unauthorized: no fetch-header is configured for this origin "
                                     + "(http://127.0.0.1:\(a.port))"), "\(none.stderr)")

        let wrong = try Daemon(origin: nil, arguments: feeds + ["--fetch-header", "Authorization: Bearer not-\(Self.token)"])
        let refused = try cachectl(["prefetch", "posts"], socket: wrong.socket)
        #expect(refused.stderr.contains("posts-url \(auth)/posts.json: HTTP 401 Unauthorized: the origin refused the configured "
                                        + "fetch-header credentials (Authorization)"), "\(refused.stderr)")
        #expect(wrong.log.contains("the origin refused the configured fetch-header credentials"), "\(wrong.log)")
        Self.expectNoSecret(refused.stderr + wrong.log, "the refusal")

        // The right token, for A: the image on C that asks for it is refused, C not being configured.
        let right = try Daemon(origin: nil, arguments: feeds + ["--fetch-header", "Authorization: Bearer \(Self.token)"])
        _ = try cachectl(["prefetch"], socket: right.socket)
        let row = try right.call("get_image", [("row", num(1))])
        #expect(row["error"]?["message"]?.string?.contains("HTTP 401 Unauthorized: no fetch-header is configured for this origin "
                                                            + "(http://localhost:\(c.port))") == true, "\(row)")
        #expect(try right.call("get_image", [("row", num(0))])["image"] != nil, "row 0, on A, is cached")
        #expect(try c.requests().allSatisfy { Self.sent($0) == [nil, nil] })
    }

    @Test func sighupRereadsTheFileAndTheOriginsFollowTheURLs() throws {
        let a = try Origin(), b = try Origin()
        try a.requireToken(Self.token)
        try b.requireToken(Self.token)
        let scratch = Scratch()
        let file = try Self.headerFile(scratch, "Authorization: Bearer old-\(Self.token)\n")
        let conf = scratch.path + "/cached.conf"
        func configure(_ origin: Origin) throws {
            try "posts-url = \(origin.base)/auth/posts.json\nfetch-header-file = \(file)\n".write(toFile: conf, atomically: false, encoding: .utf8)
            #expect(chmod(conf, 0o644) == 0)
        }
        try configure(a)
        let daemon = try Daemon(origin: nil, arguments: ["--config", conf], scratch: scratch)
        #expect(try cachectl(["prefetch", "posts"], socket: daemon.socket).stderr.contains("refused the configured fetch-header credentials"))

        // A new token in the same file: a reload reads it.
        _ = try Self.headerFile(scratch, "Authorization: Bearer \(Self.token)\n")
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("SIGHUP: reloaded \(conf)") }, "\(daemon.log)")
        #expect(daemon.log.contains("fetch-header-file \(file) (Authorization: <redacted>) -> \(file) (Authorization: <redacted>)"), "\(daemon.log)")
        let fetched = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        #expect(fetched.status == 0, "\(fetched.stderr)")

        // posts-url moves to B: the headers go to B now, and no longer to A.
        try configure(b)
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("posts-url \(a.base)/auth/posts.json -> \(b.base)") }, "\(daemon.log)")
        #expect(try cachectl(["prefetch", "posts"], socket: daemon.socket).status == 0)
        #expect(try b.requests().map(Self.sent) == [["Bearer \(Self.token)", nil]])
        #expect(try a.requests().map { Self.sent($0)[0] } == ["Bearer old-\(Self.token)", "Bearer \(Self.token)"])

        // A file others can read is refused at reload too; the running headers stay.
        #expect(chmod(file, 0o644) == 0)
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("configuration not reloaded") }, "\(daemon.log)")
        #expect(daemon.log.contains("refusing to read the fetch-header-file: \(file) can be read by every user (mode 644)"), "\(daemon.log)")
        #expect(try cachectl(["prefetch", "posts", "--force"], socket: daemon.socket).status == 0, "the running token is kept")
        Self.expectNoSecret(daemon.log, "the log")
    }

    @Test func aHeaderFileOthersCanReadOrThatAnotherUserOwnsIsRefusedAtStart() throws {
        let scratch = Scratch()
        let file = try Self.headerFile(scratch, "Authorization: Bearer \(Self.token)\n")
        #expect(chmod(file, 0o644) == 0)
        let check = try runProgram(Paths.cached, ["--config", "/dev/null", "--fetch-header-file", file, "--check-config"])
        #expect(check.status == 2)
        #expect(check.output == "cached: refusing to read the fetch-header-file: \(file) can be read by every user (mode 644); "
                + "it holds secrets that no other user may read (chmod go-rw \(file))\n", "\(check.output)")
        let daemon = try Daemon(origin: nil, arguments: ["--fetch-header-file", file], scratch: scratch, waitReady: false)
        if !waitUntil(20, { !daemon.isRunning }) { daemon.kill9(); Issue.record("the daemon started: \(daemon.log)") }
        #expect(daemon.waitForExit() == 2)
        #expect(daemon.log.contains("can be read by every user (mode 644)"), "\(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: daemon.store), "no store was made")

        #expect(chmod(file, 0o600) == 0 && chown(file, StoreSecurityTests.nobody, StoreSecurityTests.nobody) == 0)
        let owned = try runProgram(Paths.cached, ["--config", "/dev/null", "--fetch-header-file", file, "--check-config"])
        #expect(owned.status == 2)
        let me = geteuid()
        #expect(owned.output.contains("refusing to read the fetch-header-file: \(file) is owned by uid 65534, not by "
                                      + (me == 0 ? "root" : "root or uid \(me)")), "\(owned.output)")
        #expect(owned.output.contains("(chown \(me) \(file) and chmod go-w \(file)"), "it names the fix: \(owned.output)")
        Self.expectNoSecret(check.output + owned.output + daemon.log, "the refusals")
    }
}
