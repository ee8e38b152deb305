import Testing
import CacheHTTP
@_spi(Harness) @testable import CacheDaemon

/// The Host and Origin checks (docs/http.md, "Hosts and origins"), on
/// requests as the parser gives them.
@Suite struct HTTPHostPolicyTests {
    func post(host: String?, origin: String? = nil, xfp: String? = nil, forwarded: String? = nil) -> HTTPRequest {
        var r = HTTPRequest(method: .post, path: ["gc"], host: host, origin: origin)
        r.authority = host.flatMap(HTTPAuthority.init)
        r.forwardedProto = xfp
        r.forwarded = forwarded
        return r
    }

    @Test func onlyIPLiteralsLocalhostAndAllowedNamesAreServed() {
        let p = HTTPHostPolicy(allowedHosts: ["Cache.Example.org"])
        for host in ["127.0.0.1", "127.0.0.1:8080", "[::1]:80", "[::ffff:10.0.0.1]", "localhost", "LocalHost:9",
                     "cache.example.org", "CACHE.example.org:8443"] {
            #expect(p.refusal(HTTPAuthority(host)) == nil, "\(host)")
        }
        for host in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "[evil.example]",
                     "example.org", "127.0.0.1:junk"] {
            #expect(p.refusal(HTTPAuthority(host)) != nil, "\(host)")
        }
        #expect(p.refusal(nil)?.contains("without Host") == true, "HTTP/1.0 without Host")
    }

    @Test func anOriginIsTheSameOnlyWithTheSameSchemeHostAndPort() {
        let p = HTTPHostPolicy()
        let same: [(String, String)] = [("127.0.0.1:8080", "http://127.0.0.1:8080"), ("localhost", "http://localhost"),
                                        ("localhost", "http://localhost:80"), ("localhost:80", "HTTP://LocalHost"),
                                        ("[::1]:8080", "http://[::1]:8080")]
        for (host, origin) in same { #expect(p.originRefusal(origin, post(host: host)) == nil, "\(host) \(origin)") }
        let other: [(String, String)] = [("127.0.0.1:8080", "http://127.0.0.1"), ("127.0.0.1", "http://127.0.0.1:8080"),
                                         ("127.0.0.1:8080", "https://127.0.0.1:8080"), ("localhost", "http://localhost/"),
                                         ("localhost", "null"), ("localhost", "http://evil.example"), ("localhost", "localhost"),
                                         ("localhost", "http://localhost:443")]
        for (host, origin) in other { #expect(p.originRefusal(origin, post(host: host)) != nil, "\(host) \(origin)") }
    }

    @Test func forwardedSchemesAreReadOnlyWhenTrusted() {
        let https = post(host: "cache.example.org", origin: nil, xfp: "https")
        #expect(HTTPHostPolicy().scheme(https) == .success("http"))
        #expect(HTTPHostPolicy().originRefusal("https://cache.example.org", https) != nil)
        let trusting = HTTPHostPolicy(trustForwarded: true)
        #expect(trusting.originRefusal("https://cache.example.org", https) == nil)
        #expect(trusting.originRefusal("https://cache.example.org:443", https) == nil)
        #expect(trusting.originRefusal("http://cache.example.org", https) != nil)
        #expect(trusting.scheme(post(host: "a", xfp: "http, HTTPS")) == .success("https"), "the last, the nearest proxy's")
        #expect(trusting.scheme(post(host: "a", forwarded: "for=1.2.3.4;proto=http, for=5.6.7.8;Proto=\"https\"")) == .success("https"))
        #expect(trusting.scheme(post(host: "a", xfp: "https", forwarded: "for=1.2.3.4")) == .success("https"), "no proto in Forwarded")
        #expect(trusting.scheme(post(host: "a", xfp: "https", forwarded: "proto=https")) == .success("https"))
        #expect(trusting.scheme(post(host: "a")) == .success("http"))
        guard case .failure = trusting.scheme(post(host: "a", xfp: "https", forwarded: "proto=http")) else {
            Issue.record("disagreeing headers were guessed at"); return
        }
        guard case .failure = trusting.scheme(post(host: "a", xfp: "gopher")) else { Issue.record("gopher taken"); return }
    }
}
