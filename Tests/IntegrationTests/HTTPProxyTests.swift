import Foundation
import Testing
import CacheProtocol

/// docs/http.md's nginx recipe (Tests/Fixtures/servers/nginx-http-proxy.conf)
/// in front of the Unix-socket listener, on a port that is neither 80 nor
/// 443: the Host check and an admin POST's Origin check see what the
/// browser sent, port and scheme included.
@Suite(.serialized) struct HTTPProxyTests {
    /// A page that rebinds its own name to nginx's address is refused; a
    /// page of nginx's own origin may POST; any other origin may not.
    @Test func throughNginxARebindingHostIsRefusedAndOnlyTheSameOriginMayPOST() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin"])
        let proxy = try Nginx(proxyingUnixSocket: f.httpSocket)
        let base = "http://127.0.0.1:\(proxy.port)"
        for path in ["/posts", "/healthz", "/images"] {
            let r = try f.curl(["-H", "Host: evil.example:\(proxy.port)", base + path])
            #expect(r.heads.hasPrefix("HTTP/1.1 421 ") && r.body.contains(UInt8(ascii: "{")), "\(path) as evil.example: \(r.heads)")
        }
        let rebound = try f.curl(["-X", "POST", "-H", "Host: evil.example:\(proxy.port)",
                                  "-H", "Origin: http://evil.example:\(proxy.port)", base + "/gc"])
        #expect(rebound.heads.hasPrefix("HTTP/1.1 421 "), "a rebound page's POST: \(rebound.heads)")
        // A name nobody allowed is refused too, whatever its port.
        let unnamed = try f.curl(["-H", "Host: cache.example.org:\(proxy.port)", base + "/healthz"])
        #expect(unnamed.heads.hasPrefix("HTTP/1.1 421 "), "\(unnamed.heads)")

        let same = try f.curl(["-X", "POST", "-H", "Origin: http://127.0.0.1:\(proxy.port)", base + "/gc"])
        #expect(try same.heads.hasPrefix("HTTP/1.1 200 ") && JSONParser.parse(same.body)["ok"] == .bool(true),
                "the page's own origin, on nginx's port: \(same.heads)\(String(decoding: same.body, as: UTF8.self))")
        for origin in ["http://127.0.0.1", "http://127.0.0.1:\(f.port)", "https://127.0.0.1:\(proxy.port)",
                       "http://evil.example:\(proxy.port)", "null"] {
            let r = try f.curl(["-X", "POST", "-H", "Origin: \(origin)", base + "/gc"])
            #expect(r.heads.hasPrefix("HTTP/1.1 403 "), "Origin \(origin) is another origin: \(r.heads)")
        }
    }

    /// Over https, the browser's Origin is `https://...`: it matches only
    /// when the daemon trusts the proxy's `X-Forwarded-Proto`
    /// (`http-trust-forwarded`); a client cannot claim it without that.
    @Test func overHTTPSTheForwardedSchemeIsHonouredOnlyWhenTrusted() throws {
        let plain = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin", "--http-allowed-hosts", "cache.example.org"])
        let plainProxy = try Nginx(proxyingUnixSocket: plain.httpSocket, tls: true)
        let origin = "https://cache.example.org:\(plainProxy.port)"
        let untrusted = try plain.curl(["-k", "--resolve", "cache.example.org:\(plainProxy.port):127.0.0.1",
                                        "-X", "POST", "-H", "Origin: \(origin)", origin + "/gc"])
        #expect(untrusted.heads.hasPrefix("HTTP/1.1 403 "), "X-Forwarded-Proto is not read unless trusted: \(untrusted.heads)")
        let read = try plain.curl(["-k", "--resolve", "cache.example.org:\(plainProxy.port):127.0.0.1", origin + "/healthz"])
        #expect(read.heads.hasPrefix("HTTP/1.1 200 "), "an allowed name through nginx: \(read.heads)\(read.stderr)")
        // Straight to the TCP port, a client's own X-Forwarded-Proto changes nothing.
        let claimed = try plain.curl(["-X", "POST", "-H", "X-Forwarded-Proto: https", "-H", "Origin: https://127.0.0.1:\(plain.port)",
                                      plain.base + "/gc"])
        #expect(claimed.heads.hasPrefix("HTTP/1.1 403 "), "\(claimed.heads)")

        let f = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin", "--http-allowed-hosts", "cache.example.org",
                                                             "--http-trust-forwarded"])
        let proxy = try Nginx(proxyingUnixSocket: f.httpSocket, tls: true)
        let trustedOrigin = "https://cache.example.org:\(proxy.port)"
        let resolve = ["-k", "--resolve", "cache.example.org:\(proxy.port):127.0.0.1"]
        let trusted = try f.curl(resolve + ["-X", "POST", "-H", "Origin: \(trustedOrigin)", trustedOrigin + "/gc"])
        #expect(try trusted.heads.hasPrefix("HTTP/1.1 200 ") && JSONParser.parse(trusted.body)["ok"] == .bool(true),
                "the same origin over https: \(trusted.heads)\(trusted.stderr)")
        // nginx replaces a client's X-Forwarded-Proto with the scheme it was reached by.
        for (extra, origin) in [([] as [String], "http://cache.example.org:\(proxy.port)"),
                                (["-H", "X-Forwarded-Proto: http"], "http://cache.example.org:\(proxy.port)"),
                                ([], "https://cache.example.org")] {
            let r = try f.curl(resolve + extra + ["-X", "POST", "-H", "Origin: \(origin)", trustedOrigin + "/gc"])
            #expect(r.heads.hasPrefix("HTTP/1.1 403 "), "Origin \(origin) \(extra): \(r.heads)")
        }
        // Forwarded and X-Forwarded-Proto that disagree are not guessed at.
        let both = try f.curl(["-X", "POST", "-H", "X-Forwarded-Proto: https", "-H", "Forwarded: proto=http",
                               "-H", "Origin: https://127.0.0.1:\(f.port)", f.base + "/gc"])
        #expect(both.heads.hasPrefix("HTTP/1.1 403 "), "\(both.heads)")
        let forwarded = try f.curl(["-X", "POST", "-H", "Forwarded: for=127.0.0.1;proto=https", "-H", "Origin: https://127.0.0.1:\(f.port)",
                                    f.base + "/gc"])
        #expect(forwarded.heads.hasPrefix("HTTP/1.1 200 "), "Forwarded's proto, trusted: \(forwarded.heads)")
    }
}
