import Testing
@testable import CacheHTTP

/// Parses `text` as the start of a connection's input.
func parse(_ text: String, limits: HTTPLimits = HTTPLimits()) -> HTTPParse {
    Array(text.utf8).withUnsafeBytes { HTTPParser.parse($0, limits: limits) }
}

func request(_ text: String) throws -> HTTPRequest {
    guard case .request(let r, _) = parse(text) else { throw ParseFailure(result: parse(text)) }
    return r
}

struct ParseFailure: Error { var result: HTTPParse }

func rejection(_ text: String, limits: HTTPLimits = HTTPLimits()) -> HTTPRejection? {
    if case .rejected(let r) = parse(text, limits: limits) { return r }
    return nil
}

@Suite struct HTTPParserTests {
    @Test func parsesAGetWithTheFieldsTheFrontEndUses() throws {
        let text = "GET /images/3?fetch=0 HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-9\r\nIf-None-Match: \"ab\"\r\nIf-Range: \"ab\"\r\nOrigin: http://localhost\r\nUser-Agent: x\r\n\r\n"
        guard case let .request(r, length) = parse(text) else { Issue.record("not parsed"); return }
        #expect(length == text.utf8.count)
        #expect(r.method == .get)
        #expect(r.path == ["images", "3"])
        #expect(r.query("fetch") == "0")
        #expect(r.minorVersion == 1 && r.keepAlive)
        #expect(r.host == "localhost" && r.range == "bytes=0-9" && r.ifNoneMatch == "\"ab\"" && r.ifRange == "\"ab\"")
        #expect(r.origin == "http://localhost")
    }

    @Test func aHeadIsIncompleteUntilItsEmptyLine() {
        #expect(parse("GET / HTTP/1.1\r\nHost: a\r\n") == .incomplete)
        #expect(parse("GET / HTT") == .incomplete)
        #expect(parse("") == .incomplete)
    }

    @Test func pipelinedRequestsAreTakenOneHeadAtATime() throws {
        let one = "GET /posts/1 HTTP/1.1\r\nHost: a\r\n\r\n"
        guard case .request(_, let length) = parse(one + "GET /posts/2 HTTP/1.1\r\nHost: a\r\n\r\n") else { Issue.record("no"); return }
        #expect(length == one.utf8.count)
    }

    @Test func bareLineFeedsAndLeadingEmptyLinesAreAccepted() throws {
        let r = try request("\r\n\nGET / HTTP/1.1\nHost: a\n\n")
        #expect(r.path == [""])
    }

    @Test func keepAliveFollowsTheVersionAndConnection() throws {
        #expect(try request("GET / HTTP/1.0\r\n\r\n").keepAlive == false)
        #expect(try request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepAlive == true)
        #expect(try request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keepAlive == false)
        #expect(try request("GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, Close\r\n\r\n").keepAlive == false)
        #expect(try request("GET / HTTP/1.1\r\nHost: a\r\n\r\n").keepAlive == true)
    }

    @Test func methodsOtherThanGetHeadAndPostAreKeptByName() throws {
        #expect(try request("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n").method == .head)
        #expect(try request("POST /gc HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").method == .post)
        #expect(try request("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n").method == .other("DELETE"))
    }

    @Test func aBodyLengthIsReportedSoTheLoopSkipsIt() throws {
        #expect(try request("POST /gc HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n").contentLength == 12)
        #expect(try request("POST /gc HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nContent-Length: 12\r\n\r\n").contentLength == 12)
    }

    @Test(arguments: [
        ("GET /\r\n\r\n", 400),                                         // no version
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),                    // two spaces
        ("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),                    // a trailing space
        ("G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),                     // the method is not a token
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),                       // HTTP/2 prior knowledge
        ("GET / HTTP/1.1\r\n\r\n", 400),                                 // no Host
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),          // two Hosts
        ("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),                    // whitespace before the colon
        ("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),          // obsolete folding
        ("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", 400),        // a bare CR
        ("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\u{0}c\r\n\r\n", 400),     // NUL in a value
        ("GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413),
        ("POST /gc HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        ("GET /posts%2F1 HTTP/1.1\r\nHost: a\r\n\r\n", 400),            // an encoded slash
        ("GET /posts%5c1 HTTP/1.1\r\nHost: a\r\n\r\n", 400),            // an encoded backslash
        ("GET /posts/../etc HTTP/1.1\r\nHost: a\r\n\r\n", 400),         // a dot segment
        ("GET /posts/%2e%2E/etc HTTP/1.1\r\nHost: a\r\n\r\n", 400),     // an encoded dot segment
        ("GET /./posts HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /posts%00 HTTP/1.1\r\nHost: a\r\n\r\n", 400),             // an encoded NUL
        ("GET /posts?x=%00 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /posts%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400),             // a bad escape
        ("GET /posts% HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /%ff HTTP/1.1\r\nHost: a\r\n\r\n", 400),                  // not UTF-8
        ("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400),                  // a fragment
        ("GET posts HTTP/1.1\r\nHost: a\r\n\r\n", 400),                 // neither a path nor a URL
        ("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /\u{7f} HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("\r\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),              // a bare CR before the request line
        ("\r\n\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost:\r\n\r\n", 400),                    // an empty Host
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400),
        ("GET http://a/b@c/ HTTP/1.1\r\nHost: a\r\n\r\n", 200),        // '@' in the path, not the authority
        ("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("POST /gc HTTP/1.1\r\nHost: a\r\nExpect: the-unexpected\r\n\r\n", 417),
    ])
    func refusesMalformedHeads(_ text: String, _ status: Int) {
        #expect((rejection(text)?.status.code ?? 200) == status, "\(text.debugDescription)")
    }

    @Test func aLoneCRMayStillBecomeAnEmptyLine() {
        #expect(parse("\r") == .incomplete)
        #expect(parse("\r\nGET / HTTP/1.0\r\n\r\n") != .incomplete)
    }

    @Test func theAbsoluteFormsAuthorityIsTheHost() throws {
        let r = try request("GET http://127.0.0.1:8080/posts/1 HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        #expect(r.host == "127.0.0.1:8080" && r.path == ["posts", "1"])
    }

    @Test func expectContinueAndTheBodysTypeAreKept() throws {
        let r = try request("POST /gc HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Type: Text/Plain; charset=utf-8\r\nContent-Length: 3\r\n\r\n")
        #expect(r.expectsContinue && r.contentType == "text/plain" && r.contentLength == 3)
    }

    @Test func aLongRequestLineIs414AndALongHeadIs431() {
        let limits = HTTPLimits(maxRequestLine: 64, maxHeadBytes: 256, maxHeaders: 4)
        let long = "GET /" + String(repeating: "a", count: 100)
        #expect(rejection(long, limits: limits)?.status == .uriTooLong)  // refused before its end arrives
        #expect(rejection(long + " HTTP/1.1\r\nHost: a\r\n\r\n", limits: limits)?.status == .uriTooLong)
        let big = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 300)
        #expect(rejection(big, limits: limits)?.status == .headersTooLarge)
        let many = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n"
        #expect(rejection(many, limits: limits)?.status == .headersTooLarge)
        #expect(rejection(String(repeating: "\r\n", count: 40), limits: limits)?.status == .badRequest)
    }

    @Test func anAbsoluteFormTargetIsItsPath() throws {
        #expect(try request("GET http://localhost:8080/posts/1?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").path == ["posts", "1"])
        #expect(try request("GET HTTP://localhost HTTP/1.1\r\nHost: a\r\n\r\n").path == [""])
        #expect(try request("GET http://localhost?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").query("x") == "1")
    }

    @Test func theTargetIsPercentDecodedPerSegment() throws {
        let r = try request("GET /images/%33?description=a+b%26c&fetch HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(r.path == ["images", "3"])
        #expect(r.query("description") == "a b&c")
        #expect(r.query("fetch") == "")
        #expect(try request("GET /posts/ HTTP/1.1\r\nHost: a\r\n\r\n").path == ["posts", ""])
    }

    /// Segments and query pairs with nothing to decode take a shorter path
    /// (no decoded copy): the same text and the same refusals as decoded ones.
    @Test func targetsWithNothingToDecodeReadAsDecodedOnesDo() throws {
        let r = try request("GET /a+b/c?q=a+b&r=plain&s HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(r.path == ["a+b", "c"], "a + in the path is a +")
        #expect(r.query("q") == "a b" && r.query("r") == "plain" && r.query("s") == "")
        #expect(try request("GET /posts/%2e%2e HTTP/1.1\r\nHost: a\r\n\r\n").path == ["posts", ".."], "an encoded id may be ..")
        #expect(try request("GET /posts/a.b HTTP/1.1\r\nHost: a\r\n\r\n").path == ["posts", "a.b"])
        for target in ["/a\\b", "/posts/..", "/posts/.", "/x/posts/%2e%2e", "/a/../b"] {
            #expect(rejection("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")?.status == .badRequest, "\(target)")
        }
    }

    @Test func twoRangeHeadersAreNeitherHonoured() throws {
        #expect(try request("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nRange: bytes=2-3\r\n\r\n").range == nil)
    }
}
