import Foundation
import Testing
import CacheSystem
@testable import CacheStore
import CacheProtocol

/// Validators healed from a 0.1.0 store, and the proxy settings, with the
/// real daemon. (Real web servers as origins: RealOriginTests.)
@Suite struct OriginSettingsTests {
    static let fast = ["--retries", "0", "--timeout", "5", "--connect-timeout", "2"]

    @Test func damagedValidatorsFromAnOldStoreAreDroppedAndReplaced() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let feed = origin.base + "/etag/posts.json"
        var daemon = try Daemon(origin: origin, arguments: ["--posts-url", feed], scratch: scratch)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        // What 0.1.0 logged: the ETag with the header line's CRLF.
        let files = try ConfinedDirectory(opening: daemon.store)
        defer { files.close() }
        var log = try IndexLog(directory: files, name: "index.log") { _ in }
        try log.append([.validators(feed: .posts, etag: "\"stale\"\r\n", lastModified: nil)])
        log.close()

        daemon = try Daemon(origin: origin, arguments: ["--posts-url", feed], scratch: scratch)
        #expect(daemon.log.contains("the stored ETag or Last-Modified of the posts feed held a control character and was dropped"))
        for _ in 0..<2 { #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true)) }
        let requests = try origin.requests().filter { $0.path == "/etag/posts.json" }
        #expect(requests.map(\.status) == [200, 200, 304], "healing costs one unconditional fetch, then 304s")
        #expect(requests[1].ifNoneMatch == nil)
        #expect(requests[2].ifNoneMatch?.hasPrefix("\"") == true && requests[2].ifNoneMatch?.hasSuffix("\"") == true)
        #expect(daemon.stop() == 0)
        daemon = try Daemon(origin: origin, arguments: ["--posts-url", feed], scratch: scratch)
        #expect(!daemon.log.contains("held a control character"), "the clean validators were logged")
    }

    @Test func aProxyThatIsDownIsNamedInTheError() throws {
        let origin = try Origin()
        let closed = try unusedLocalPort()
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--proxy", "http://127.0.0.1:\(closed)"])
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["ok"] == .bool(false))
        let message = r["error"]?["message"]?.string ?? ""
        #expect(message.contains("127.0.0.1 port \(closed)"), "the message names the proxy: \(message)")
        #expect(try origin.count("/posts.json") == 0, "nothing reached the origin around the proxy")
    }

    @Test func noProxyBypassesTheProxyForTheNamedHosts() throws {
        let origin = try Origin()
        let closed = try unusedLocalPort()
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--proxy", "http://127.0.0.1:\(closed)", "--no-proxy", "localhost,127.0.0.1"])
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(true), "\(r)")
        #expect(r["images"]?["downloaded"]?.int == 16)
        #expect(try origin.count("/posts.json") == 1)
    }

    @Test func uppercaseHTTPProxyIsIgnored() throws {
        let origin = try Origin()
        let closed = try unusedLocalPort()
        let daemon = try Daemon(origin: origin, arguments: Self.fast, environment: ["HTTP_PROXY": "http://127.0.0.1:\(closed)"])
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true), "HTTP_PROXY could be set by a CGI client's Proxy: header")
    }

    @Test func proxyNoneIgnoresTheEnvironment() throws {
        let origin = try Origin()
        let closed = try unusedLocalPort()
        // libcurl reads lowercase http_proxy; `proxy = none` overrides it.
        let proxied = ["http_proxy": "http://127.0.0.1:\(closed)"]
        let failing = try Daemon(origin: origin, arguments: Self.fast, environment: proxied)
        #expect(try failing.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(false), "http_proxy is used without the setting")
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--proxy", "none"], environment: proxied)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
    }
}
