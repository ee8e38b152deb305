import Testing
import CacheFetch

/// Configured headers are checked before anything is sent, and an error
/// never holds the value; origins compare as RFC 6454 says.
@Suite struct FetchHeaderTests {
    static let secret = "s3cr3t-Value-42"

    private func refusal(_ line: String) -> String? {
        do { _ = try FetchHeader(parsing: line); return nil } catch { return error.message }
    }

    @Test func aNameAndValueAreKeptWithoutTheSpacesAroundTheValue() throws {
        let h = try FetchHeader(parsing: "X-Api-Key: \t \(Self.secret) \t")
        #expect(h.name == "X-Api-Key" && h.value == Self.secret && h.key == "x-api-key")
        #expect(try FetchHeader(parsing: "Authorization:Bearer a:b==").value == "Bearer a:b==")
        #expect("\(h)" == "X-Api-Key: <redacted>")
        // However it is printed.
        var dumped = ""
        dump([h], to: &dumped)
        for shown in ["\([h])", String(reflecting: h), dumped, "\(FetchCredentials(headers: [h]))"] {
            #expect(!shown.contains(Self.secret), "\(shown)")
        }
    }

    @Test func aNameMustBeAToken() {
        #expect(refusal("\(Self.secret)")?.contains("there is no colon") == true)
        #expect(refusal(": \(Self.secret)")?.contains("no name before the colon") == true)
        #expect(refusal("Bad Name: \(Self.secret)")?.contains("the name holds a space") == true)
        #expect(refusal("Bad@Name: \(Self.secret)")?.contains("the name holds \"@\"") == true)
        #expect(refusal("Bad\u{1}Name: x")?.contains("byte 0x1") == true)
        #expect(refusal(":authority: x") != nil, "an HTTP/2 pseudo-header is not a name")
    }

    @Test func aValueMustBeOneLineWithoutControlCharacters() {
        for bad in ["\r", "\n", "\r\n", "\u{0}", "\u{7F}", "\u{1B}"] {
            let message = refusal("X-Api-Key: a\(bad)\(Self.secret)")
            #expect(message?.contains("X-Api-Key has a value holding a control character") == true, "\(bad.unicodeScalars.map(\.value))")
            #expect(message?.contains(Self.secret) == false)
        }
        #expect(refusal("X-Api-Key:   ") == "X-Api-Key has an empty value")
        #expect(refusal("X-Api-Key: a\tb") == nil, "a tab inside is a field value's")
    }

    @Test(arguments: ["Host", "content-length", "Transfer-Encoding", "If-None-Match", "IF-MODIFIED-SINCE", "Range",
                      "Connection", "User-Agent", "Accept-Encoding", "TE", "Upgrade", "Proxy-Authorization", "Expect"])
    func aHeaderCachedSendsItselfIsRefused(_ name: String) {
        let message = refusal("\(name): \(Self.secret)")
        #expect(message?.hasPrefix("\(name) is sent by cached itself (") == true, "\(message ?? "accepted")")
        #expect(message?.hasSuffix("; it cannot be configured") == true)
        #expect(message?.contains(Self.secret) == false)
    }

    @Test func aFileHoldsLinesCommentsAndBlankLines() throws {
        let text = "# the feed's token\r\n\nAuthorization: Bearer \(Self.secret)\r\n   # indented comment\n  X-Api-Key: k  \n"
        let headers = try FetchHeader.parseFile(text, path: "/run/credentials/x/token")
        #expect(headers.map(\.name) == ["Authorization", "X-Api-Key"])
        #expect(headers.map(\.value) == ["Bearer \(Self.secret)", "k"])
    }

    @Test func aFileErrorNamesTheLineAndNeverTheValue() {
        func error(_ text: String) -> String? {
            do { _ = try FetchHeader.parseFile(text, path: "/f"); return nil } catch { return error.message }
        }
        #expect(error("# c\n\(Self.secret)\n") == "/f:2: must be \"Name: value\", and there is no colon")
        #expect(error("A: 1\nB: 2\na: \(Self.secret)\n") == "/f:3: a is given twice; give it once")
        #expect(error("Host: \(Self.secret)")?.hasPrefix("/f:1: Host is sent by cached itself") == true)
    }

    @Test func originsIgnoreCaseAndDefaultPortsAndNothingElse() throws {
        let a = try #require(URLOrigin("HTTPS://Feeds.Example.org/posts.json?x=1"))
        #expect(a.description == "https://feeds.example.org:443")
        #expect(URLOrigin("https://feeds.example.org:443/other") == a)
        #expect(URLOrigin("http://feeds.example.org/posts.json") != a, "another scheme")
        #expect(URLOrigin("https://feeds.example.org:8443/") != a, "another port")
        #expect(URLOrigin("https://cdn.example.org/") != a, "another host")
        #expect(URLOrigin("http://127.0.0.1/")?.port == 80)
        #expect(URLOrigin("http://[::1]:8080/")?.description == "http://[::1]:8080")
        #expect(URLOrigin("ftp://example.org/") == nil)
        #expect(URLOrigin("/relative") == nil)
    }

    @Test func theDescriptionNamesHeadersAndOriginsButNoValue() throws {
        let c = FetchCredentials(headers: [try FetchHeader(parsing: "Authorization: Bearer \(Self.secret)")],
                                 originsOf: ["https://b.example/m.json", "http://a.example:8080/p.json", "not a url"])
        #expect(c.description == "Authorization to http://a.example:8080, https://b.example:443")
        #expect(FetchCredentials.none.description == "none")
    }
}
