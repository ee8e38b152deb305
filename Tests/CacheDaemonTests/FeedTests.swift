import Testing
import Glibc
import Foundation
@testable import CacheDaemon
import CacheProtocol

@Suite struct PostsDecodingTests {
    @Test func keepsValidPostsWithUnknownFieldsAndSkipsInvalidOnes() throws {
        let feed = """
        [
          {"userId": 1, "id": 1, "title": "a", "body": "b", "extra": {"kept": true}},
          {"userId": 1, "id": 2, "title": null},
          {"id": 3},
          {"userId": 1, "title": "no id"},
          {"userId": 1, "id": "4", "title": "string id"},
          {"userId": 1, "id": 5.5},
          {"userId": 1, "id": null},
          42,
          {"userId": 2, "id": 2, "title": "repeated id"},
          {"userId": 9, "id": -6}
        ]
        """
        let d = try FeedDecoder.posts(Array(feed.utf8))
        #expect(d.posts.map(\.id) == [1, 2, 3, -6])
        #expect(d.invalid == 6)
        #expect(d.problems.count == 6)
        #expect(String(decoding: d.posts[0].json, as: UTF8.self) == #"{"userId":1,"id":1,"title":"a","body":"b","extra":{"kept":true}}"#)
    }

    @Test func aFeedThatIsNotAnArrayIsAnError() {
        for body in [#"{"posts": []}"#, "[{\"id\":1}", "<html>", ""] {
            #expect(throws: JSONError.self, "\(body)") { try FeedDecoder.posts(Array(body.utf8)) }
        }
    }

    @Test func theBundledFixtureDecodesCompletely() throws {
        let d = try FeedDecoder.posts(Array(Fixture.posts.utf8))
        #expect(d.posts.count == 2)
        #expect(d.invalid == 0)
    }
}

enum Fixture {
    static let posts = """
    [{"userId": 1, "id": 1, "title": "sunt aut facere", "body": "quia et suscipit\\nsuscipit"},
     {"userId": 1, "id": 2, "title": "qui est esse", "body": "est rerum tempore vitae"}]
    """
}

@Suite struct ManifestTests {
    @Test func rowsArePositionsAndElementsWithoutURLKeepTheirRow() throws {
        let m = try FeedDecoder.manifest(Array(#"[{"url":"a.png","description":"A"},{"description":"no url"},{"url":"b.png"}]"#.utf8))
        #expect(m == [ManifestEntry(url: "a.png", description: "A"), ManifestEntry(url: "", description: "no url"),
                      ManifestEntry(url: "b.png", description: nil)])
        #expect(throws: JSONError.self) { try FeedDecoder.manifest(Array(#"{"url":"a"}"#.utf8)) }
    }

    @Test func baseURLDefaultsToTheManifestDirectory() {
        #expect(FeedDecoder.baseURL(imagesURL: "http://h/img/list.json", imagesBaseURL: nil) == "http://h/img/")
        #expect(FeedDecoder.baseURL(imagesURL: "http://h/img/list.json", imagesBaseURL: "https://cdn/x") == "https://cdn/x/")
        #expect(FeedDecoder.baseURL(imagesURL: nil, imagesBaseURL: nil) == nil)
    }

    @Test func relativeURLsResolveAgainstTheBase() {
        let base = "http://h:8080/img/"
        #expect(FeedDecoder.resolve("a.png", base: base) == "http://h:8080/img/a.png")
        #expect(FeedDecoder.resolve("sub/a.png", base: base) == "http://h:8080/img/sub/a.png")
        #expect(FeedDecoder.resolve("../a.png", base: base) == "http://h:8080/a.png")
        #expect(FeedDecoder.resolve("/root.png", base: base) == "http://h:8080/root.png")
        #expect(FeedDecoder.resolve("https://other/x.jpg", base: base) == "https://other/x.jpg")
        #expect(FeedDecoder.resolve("//cdn.example/x.jpg", base: base) == "http://cdn.example/x.jpg")
    }

    @Test func thePlainPathShortcutAgreesWithTheURLParser() {
        let base = "http://h:8080/img/"
        for path in ["a.png", "x/y/z.jpg", "a..b.png", "v1.2/file-name_~x.gif", "0", "a/b.", "a/.b"] {
            #expect(FeedDecoder.isPlainRelativePath(path), "\(path)")
            #expect(FeedDecoder.resolve(path, base: base) == URL(string: path, relativeTo: URL(string: base))?.absoluteString, "\(path)")
        }
        for path in ["./a.png", "../a.png", "a/../b.png", "a/./b.png", "a b.png", "a?x=1", "a#f", "%41.png", "é.png", "/abs.png", "a/.."] {
            #expect(!FeedDecoder.isPlainRelativePath(path), "\(path)")
        }
    }

    @Test func onlyHTTPAndHTTPSAreEverFetched() {
        let base = "http://h/img/"
        #expect(FeedDecoder.resolve("file:///etc/passwd", base: base) == nil)
        #expect(FeedDecoder.resolve("ftp://h/a.png", base: base) == nil)
        #expect(FeedDecoder.resolve("gopher://h/a.png", base: base) == nil)
        #expect(FeedDecoder.resolve("", base: base) == nil)
        #expect(FeedDecoder.resolve("a.png", base: nil) == nil)
    }
}

@Suite struct SettingsTests {
    @Test func sizesTakePowerOfTwoSuffixes() throws {
        #expect(try Settings.size("x", "512") == 512)
        #expect(try Settings.size("x", "64K") == 65536)
        #expect(try Settings.size("x", "8M") == 8 << 20)
        #expect(try Settings.size("x", "1g") == 1 << 30)
        for bad in ["", "-1", "12Q", "M", "1.5M"] {
            #expect(throws: SettingsError.self, "\(bad)") { try Settings.size("x", bad) }
        }
    }

    @Test func flagsBeatEnvironment() throws {
        let env = ["CACHED_POSTS_URL": "http://env/posts", "CACHED_CONCURRENCY": "3", "HOME": "/home/u"]
        guard case .run(let s) = try Settings.parse(arguments: ["--posts-url", "http://flag/posts", "--max-size=1M"], environment: env) else {
            Issue.record("expected settings"); return
        }
        #expect(s.postsURL == "http://flag/posts")
        #expect(s.fetch.concurrency == 3)
        #expect(s.maxSize == 1 << 20)
    }

    @Test func badValuesNameTheSetting() {
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: ["--posts-url", "file:///etc/passwd"], environment: [:]) }
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: ["--concurrency", "0"], environment: [:]) }
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: ["--bogus", "1"], environment: [:]) }
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: [], environment: ["CACHED_MAX_SIZE": "lots"]) }
        do {
            _ = try Settings.parse(arguments: ["--log-level", "loud"], environment: [:])
        } catch {
            #expect(error.message.contains("--log-level"))
        }
    }

    @Test func defaultsFollowTheEnvironment() throws {
        guard case .run(let s) = try Settings.parse(arguments: [], environment: ["CACHE_DIRECTORY": "/var/cache/cached", "RUNTIME_DIRECTORY": "/run/cached"]) else { return }
        #expect(s.store == "/var/cache/cached")
        #expect(s.socket == "/run/cached/cached.sock")
        if getuid() != 0 {
            guard case .run(let u) = try Settings.parse(arguments: [], environment: ["XDG_CACHE_HOME": "/x/c", "XDG_RUNTIME_DIR": "/x/r"]) else { return }
            #expect(u.store == "/x/c/cached")
            #expect(u.socket == "/x/r/cached.sock")
        }
    }
}

@Suite struct URIReferenceTests {
    static let base = "http://a/b/c/d;p?q"

    /// RFC 3986 section 5.4: normal and abnormal examples.
    @Test(arguments: [
        ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"),
        ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"), ("#s", "http://a/b/c/d;p?q#s"),
        ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"), (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y#s"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
        ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"), ("../../g", "http://a/g"),
        ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."), ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g#s/../x", "http://a/b/c/g#s/../x"),
    ])
    func resolvesLikeRFC3986(_ example: (String, String)) {
        #expect(URIReference.resolve(example.0, against: Self.base) == example.1, "\(example.0)")
    }

    @Test func relativeReferencesNeedAnAbsoluteBase() {
        #expect(URIReference.resolve("a.png", against: nil) == nil)
        #expect(URIReference.resolve("a.png", against: "relative/base/") == nil)
        #expect(URIReference.resolve("HTTPS://Host/x", against: nil) == "https://Host/x")
    }
}

@Suite struct ConfigFileTests {
    @Test func readsKeyValueLinesWithCommentsAndQuotes() throws {
        let text = """
        # cached configuration
        posts-url = https://example.com/posts   # the feed
        images-url=https://example.com/images/list.json
          max-size = 512M

        log-level = "debug"
        images-base-url = "https://cdn.example.com/a#b"\r
        """
        let entries = try ConfigFile.parse(text, path: "/etc/cached/cached.conf")
        #expect(entries.map(\.key) == ["posts-url", "images-url", "max-size", "log-level", "images-base-url"])
        #expect(entries[0].value == "https://example.com/posts")
        #expect(entries[4].value == "https://cdn.example.com/a#b")
        #expect(entries[2].line == 4)
        var s = Settings()
        try ConfigFile.apply(entries, path: "x", to: &s)
        #expect(s.maxSize == 512 << 20)
        #expect(s.logLevel == .debug)
    }

    @Test(arguments: [
        ("posts-url https://x", "c.conf:1: expected \"key = value\""),
        ("bogus = 1", "c.conf:1: unknown setting \"bogus\""),
        ("\n\nmax-size =", "c.conf:3: max-size has no value"),
        ("log-level = \"debug", "c.conf:1: unterminated quoted value"),
        ("= 3", "c.conf:1: missing key"),
    ])
    func malformedLinesNameTheFileAndLine(_ example: (String, String)) {
        do {
            _ = try ConfigFile.parse(example.0, path: "c.conf")
            Issue.record("accepted \(example.0)")
        } catch {
            #expect(error.message.hasPrefix(example.1), "\(error.message)")
        }
    }

    @Test func badValuesNameTheFileAndLine() throws {
        let entries = try ConfigFile.parse("log-level = info\nconcurrency = lots\n", path: "c.conf")
        var s = Settings()
        do {
            try ConfigFile.apply(entries, path: "c.conf", to: &s)
            Issue.record("accepted a bad value")
        } catch {
            #expect(error.message.hasPrefix("c.conf:2: concurrency must be"), "\(error.message)")
        }
    }

    @Test func flagsBeatEnvironmentBeatsTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cached-conf-\(getpid())-\(Int.random(in: 0...1_000_000))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("cached.conf").path
        try "concurrency = 2\nmax-size = 1M\nlog-level = debug\n".write(toFile: file, atomically: true, encoding: .utf8)
        guard case .run(let s) = try Settings.parse(arguments: ["--config", file, "--concurrency", "5"],
                                                    environment: ["CACHED_MAX_SIZE": "2M"]) else { Issue.record("no settings"); return }
        #expect(s.fetch.concurrency == 5, "the flag wins")
        #expect(s.maxSize == 2 << 20, "the environment beats the file")
        #expect(s.logLevel == .debug, "the file beats the default")
        #expect(s.configFile == file)
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: ["--config", file + ".missing"], environment: [:]) }
        guard case .checked = try Settings.parse(arguments: ["--config", file, "--check-config"], environment: [:]) else {
            Issue.record("--check-config"); return
        }
    }
}
