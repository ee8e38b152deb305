import Testing
import Foundation
@_spi(Harness) @testable import CacheDaemon
import CacheFetch

/// ca-file, ca-path, proxy and no-proxy, and configuration files with CRLF line endings.
@Suite struct TransportSettingsTests {
    private func settings(_ args: [String], _ env: [String: String] = [:]) throws(SettingsError) -> Settings {
        guard case .run(let s) = try Settings.parse(arguments: ["--config", "/dev/null"] + args, environment: env) else {
            throw SettingsError("expected settings")
        }
        return s
    }

    private func message(_ args: [String]) -> String {
        do { _ = try settings(args); return "" } catch { return error.message }
    }

    @Test func caFileAndCAPathMustBeReadable() throws {
        let dir = NSTemporaryDirectory() + "ca-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pem = dir + "/root.pem"
        _ = FileManager.default.createFile(atPath: pem, contents: Data("-----BEGIN CERTIFICATE-----\n".utf8))
        let s = try settings(["--ca-file", pem, "--ca-path", dir])
        #expect(s.fetch.caFile == pem && s.fetch.caPath == dir)

        #expect(message(["--ca-file", dir + "/missing.pem"]).contains("--ca-file: ca-file \(dir)/missing.pem: No such file or directory"))
        #expect(message(["--ca-file", dir]).contains("is not a regular file"))
        #expect(message(["--ca-path", pem]).contains("is not a directory"))
        #expect(message(["--ca-file", "root.pem"]).contains("absolute path"))
        #expect(try settings(["--ca-file", pem], ["CACHED_CA_PATH": dir]).fetch.caPath == dir)
    }

    @Test func proxyTakesAURLWithAKnownSchemeOrNone() throws {
        #expect(try settings(["--proxy", "http://127.0.0.1:3128"]).fetch.proxy == "http://127.0.0.1:3128")
        #expect(try settings(["--proxy", "socks5h://proxy.example:1080"]).fetch.proxy == "socks5h://proxy.example:1080")
        // none: no proxy, whatever the environment says (an empty CURLOPT_PROXY).
        #expect(try settings(["--proxy", "none"]).fetch.proxy == "")
        #expect(try settings([]).fetch.proxy == nil)
        for bad in ["127.0.0.1:3128", "ftp://proxy:21", "http://", "http://a b:1"] {
            #expect(message(["--proxy", bad]).contains("proxy must be a URL"), "\(bad)")
        }
    }

    @Test func noProxyIsACommaList() throws {
        #expect(try settings(["--no-proxy", " localhost, .internal.example ,10.0.0.0/8 "]).fetch.noProxy == "localhost,.internal.example,10.0.0.0/8")
        #expect(try settings(["--no-proxy", "*"]).fetch.noProxy == "*")
        #expect(message(["--no-proxy", " , "]).contains("no-proxy must be"))
    }

    @Test func aReloadNamesEachFetchSettingThatNeedsARestart() {
        var a = Settings(), b = Settings()
        b.fetch.proxy = "http://p:1"
        b.fetch.caFile = "/x.pem"
        b.fetch.retries = 1
        let plan = a.reloadPlan(to: b)
        #expect(plan.needRestart == ["retries", "ca-file", "proxy"])
        #expect(plan.changes.isEmpty)
        #expect(plan.applied.fetch == a.fetch, "the running fetch settings stay until a restart")
        a = b
        #expect(a.reloadPlan(to: b).needRestart.isEmpty)
    }

    @Test func configFilesWithCRLFLineEndingsReadLikeLF() throws {
        let text = "# written on Windows\r\nposts-url = http://127.0.0.1:1/posts.json\r\nproxy = \"http://127.0.0.1:3128\"\r\n\r\nretries = 2\r\n"
        let entries = try ConfigFile.parse(text, path: "crlf.conf")
        #expect(entries.map(\.key) == ["posts-url", "proxy", "retries"])
        #expect(entries.map(\.value) == ["http://127.0.0.1:1/posts.json", "http://127.0.0.1:3128", "2"])
        #expect(entries.map(\.line) == [2, 3, 5])
    }

    @Test func trimmingRemovesCRLFAsBytes() {
        #expect("  value\r\n".trimmed() == "value")
        #expect("\r\n\t x \r\n".trimmed() == "x")
        #expect("a\r\nb\nc\r\n".lines() == ["a", "b", "c", ""])
    }
}
