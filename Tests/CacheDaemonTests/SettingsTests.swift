import Testing
import Glibc
import Foundation
@_spi(Harness) @testable import CacheDaemon
import CacheProtocol

@Suite struct SettingsTests {
    @Test func sizesTakePowerOfTwoSuffixes() throws {
        #expect(try ValueParser.size("x", "512") == 512)
        #expect(try ValueParser.size("x", "64K") == 65536)
        #expect(try ValueParser.size("x", "8M") == 8 << 20)
        #expect(try ValueParser.size("x", "1g") == 1 << 30)
        for bad in ["", "-1", "12Q", "M", "1.5M"] {
            #expect(throws: SettingsError.self, "\(bad)") { try ValueParser.size("x", bad) }
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
