import Testing
@testable import CacheHTTP

/// `Host` values and repeated fields (issue 22, item 10): a Host is a host
/// and an optional port of digits; a field that takes one value is refused
/// when repeated; list fields the front-end reads are joined.
@Suite struct HTTPAuthorityTests {
    @Test(arguments: [
        "[evil.example]", "[evil.example]:80", "[::1", "[::1]x", "[::1]:", "[fe80::1%25eth0]", "[v1.x]",
        "[dead:beef::1:2:3:4:5:6:7]", "127.0.0.1:junk", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:123456",
        "a:1:2", "::1", "a]", "a[b", ":80", "localhost:-1", "localhost:+80", "127.0.0.1:0", "localhost:00000",
    ])
    func refusesHostsThatAreNotAHostAndPort(_ host: String) {
        #expect(HTTPAuthority(host) == nil, "\(host)")
        #expect((rejection("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n")?.status.code ?? 200) == 400, "Host: \(host)")
        #expect((rejection("GET http://\(host)/ HTTP/1.1\r\nHost: a\r\n\r\n")?.status.code ?? 200) == 400, "authority \(host)")
    }

    @Test func splitsHostAndPort() {
        #expect(HTTPAuthority("Cache.Example.ORG:8443") == HTTPAuthority(host: "cache.example.org", port: 8443))
        #expect(HTTPAuthority("[::FFFF:127.0.0.1]:65535") == HTTPAuthority(host: "[::ffff:127.0.0.1]", port: 65535))
        #expect(HTTPAuthority("[::1]")?.isIPLiteral == true && HTTPAuthority("127.0.0.1:0080")?.port == 80)
        #expect(HTTPAuthority("127.0.0.1")?.isIPLiteral == true && HTTPAuthority("127.0.0.1.evil")?.isIPLiteral == false)
        #expect(HTTPAuthority("256.0.0.1")?.isIPLiteral == false && HTTPAuthority("localhost")?.isIPLiteral == false)
        for name in ["1.2.3", "1.2.3.4.", ".1.2.3", "1..2.3", "1.2.3.4.5", "1.2.3.1000"] {
            #expect(HTTPAuthority(name)?.isIPLiteral == false, "\(name) is a name, not an address")
        }
        #expect(HTTPAuthority("0.0.0.0")?.isIPLiteral == true && HTTPAuthority("255.255.255.255:1")?.isIPLiteral == true)
    }

    @Test(arguments: ["Origin: a", "Content-Type: application/json", "If-Range: \"a\"", "Expect: 100-continue"])
    func refusesARepeatedSingletonField(_ field: String) {
        let name = String(field.prefix { $0 != ":" })
        let r = rejection("POST /gc HTTP/1.1\r\nHost: a\r\n\(field)\r\n\(field.lowercased())\r\n\r\n")
        #expect(r?.status == .badRequest && r?.message == "more than one \(name) header", "\(field): \(String(describing: r))")
    }

    @Test func forwardedFieldsAreKeptAsOneListEach() throws {
        let r = try request("GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: http\r\nForwarded: for=1.2.3.4\r\n"
                            + "x-forwarded-proto: https\r\nForwarded: proto=https\r\n\r\n")
        #expect(r.forwardedProto == "http, https" && r.forwarded == "for=1.2.3.4, proto=https")
    }
}

extension HTTPAuthority {
    fileprivate init(host: String, port: Int?) {
        self = HTTPAuthority(host)!
        self.port = port
    }
}
