import Testing
import Glibc
import Foundation
import CacheHTTP
@testable import CacheService
import CacheProtocol

/// The defaults: a bare array, ids at /id.
func decodePosts(_ body: String, shape: FeedShape = FeedShape(prefix: "posts"), id: JSONPointer = .member("id")) throws(FeedError) -> DecodedPostsPage {
    try FeedDecoder.postsPage(Array(body.utf8), shape: shape, id: id)
}

@Suite struct PostsDecodingTests {
    /// A UTF-8 byte order mark before the JSON (IIS, some WordPress
    /// plugins) is read as whitespace, as RFC 8259 (8.1) allows; UTF-16
    /// JSON, and bodies that are no feed at all, are refused saying what
    /// they are, not "invalid JSON at byte 0" or broken XML.
    @Test func aByteOrderMarkIsIgnoredAndNonFeedsSayWhatTheyAre() throws {
        let withBOM: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(#"[{"id":1,"title":"a"},{"id":2}]"#.utf8)
        let d = try FeedDecoder.postsPage(withBOM, shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: "application/json")
        #expect(d.posts.map(\.id) == [.int(1), .int(2)])
        #expect(d.posts.first.map { String(decoding: $0.json, as: UTF8.self) } == #"{"id":1,"title":"a"}"#)

        let utf16: [UInt8] = [0xFF, 0xFE] + Array("[{\"id\":1}]".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        #expect(throws: FeedError("a JSON document in UTF-16 (it starts with a UTF-16 byte order mark, Content-Type application/json; charset=utf-16): "
                                  + "JSON between systems is UTF-8 (RFC 8259, 8.1), which is what cached reads")) {
            try FeedDecoder.postsPage(utf16, shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: "application/json; charset=utf-16")
        }
        #expect(throws: FeedError(#"the document is not JSON, RSS or Atom (Content-Type text/plain); it begins "Service temporarily unavailable""#)) {
            try FeedDecoder.postsPage(Array("Service temporarily unavailable\n".utf8), shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: "text/plain")
        }
        #expect(throws: FeedError("an empty document (Content-Type application/rss+xml), not JSON, RSS or Atom")) {
            try FeedDecoder.postsPage([], shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: "application/rss+xml")
        }
        // JSON that breaks later is still named by the parser.
        #expect(throws: FeedError.self) { try decodePosts("[{\"id\":1},") }
    }

    /// A post whose `get_post` answer could not fit a client's line is
    /// skipped and counted, not stored where no client could read it (the
    /// newcomer's 70 MiB post was stored with exit 0, then unreadable).
    @Test func aPostLongerThan64MiBIsSkippedAndCounted() throws {
        func post(_ id: Int, padding: Int) -> [UInt8] {
            Array(#"{"id":\#(id),"body":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: padding) + Array(#""}"#.utf8)
        }
        let envelope = post(0, padding: 0).count
        let largest = post(1, padding: FeedDecoder.maxPostBytes - envelope)
        let tooLarge = post(2, padding: FeedDecoder.maxPostBytes - envelope + 1)
        let body = [UInt8(ascii: "[")] + largest + [UInt8(ascii: ",")] + tooLarge + Array(#",{"id":3}]"#.utf8)
        let d = try FeedDecoder.postsPage(body, shape: FeedShape(prefix: "posts"), id: .member("id"))
        #expect(d.posts.map(\.id) == [.int(1), .int(3)])
        #expect(d.posts.first?.json.count == FeedDecoder.maxPostBytes)
        #expect(d.invalid == 1)
        #expect(d.problems == ["element 1 is a post of 67,108,865 bytes, more than the 67,108,864 (64 MiB) a post can be: its get_post answer would not fit the line a client reads"],
                "\(d.problems)")
    }

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
          {"userId": 1, "id": ""},
          {"userId": 2, "id": 2, "title": "repeated id: kept here, dropped by the refresh"},
          {"userId": 9, "id": -6}
        ]
        """
        let d = try decodePosts(feed)
        #expect(d.posts.map(\.id) == [.int(1), .int(2), .int(3), .string("4"), .int(2), .int(-6)])
        #expect(d.invalid == 5)
        #expect(d.problems.count == 5)
        #expect(String(decoding: d.posts[0].json, as: UTF8.self) == #"{"userId":1,"id":1,"title":"a","body":"b","extra":{"kept":true}}"#)
    }

    @Test func aFeedThatIsNotAnArrayIsAnError() {
        for body in [#"{"posts": []}"#, "[{\"id\":1}", "<html>", "", "5"] {
            #expect(throws: FeedError.self, "\(body)") { try decodePosts(body) }
        }
    }

    @Test func theBundledFixtureDecodesCompletely() throws {
        let d = try decodePosts(Fixture.posts)
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
        let shape = FeedShape(prefix: "images")
        let m = try FeedDecoder.manifestPage(Array(#"[{"url":"a.png","description":"A"},{"description":"no url"},{"url":"b.png"}]"#.utf8),
                                             shape: shape, fields: ItemFields()).entries
        #expect(m == [ManifestEntry(url: "a.png", description: "A"), ManifestEntry(url: "", description: "no url"),
                      ManifestEntry(url: "b.png", description: nil)])
        #expect(throws: FeedError.self) { try FeedDecoder.manifestPage(Array(#"{"url":"a"}"#.utf8), shape: shape, fields: ItemFields()) }
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

/// Manifest URLs read as a browser reads them (the WHATWG URL standard).
@Suite struct BrowserURLTests {
    static let base = "http://h/img/"

    @Test(arguments: [
        ("a b.png", "http://h/img/a%20b.png"),
        ("caf\u{E9} cr\u{E8}me.png", "http://h/img/caf%C3%A9%20cr%C3%A8me.png"),
        ("\u{1F600}.png", "http://h/img/%F0%9F%98%80.png"),
        ("a\"b<c>d`e{f}g^h.png", "http://h/img/a%22b%3Cc%3Ed%60e%7Bf%7Dg%5Eh.png"),
        // What a browser leaves alone in a path: `|`, `[`, `]`, `'`, and `%` (existing escapes).
        ("a|b[1]'c'.png", "http://h/img/a|b[1]'c'.png"),
        ("a%20b.png", "http://h/img/a%20b.png"),
        ("%E9t%C3%A9 100%.png", "http://h/img/%E9t%C3%A9%20100%.png"),
        ("a%zz.png", "http://h/img/a%zz.png"),
        // Backslashes are slashes before the query, then themselves.
        ("sub\\a b.png", "http://h/img/sub/a%20b.png"),
        ("..\\up.png", "http://h/up.png"),
        ("\\\\cdn.example\\x.png", "http://cdn.example/x.png"),
        ("http:\\\\Other.Example\\x.png", "http://other.example/x.png"),
        ("a.png?x=\\y", "http://h/img/a.png?x=\\y"),
        // The query encodes space, quote, <, > and ' (a special scheme's set), not ` or {.
        ("a.png?q=a b&n='1'&t=<x>`{}", "http://h/img/a.png?q=a%20b&n=%271%27&t=%3Cx%3E`{}"),
        // The fragment encodes space, quote, <, > and `, not '.
        ("a.png#x y`'\"", "http://h/img/a.png#x%20y%60'%22"),
        // Controls and spaces at the ends trimmed, tab and newlines removed anywhere, other controls encoded.
        ("  a b.png \n", "http://h/img/a%20b.png"),
        ("\u{0}\u{1F} a.png\u{7}", "http://h/img/a.png"),
        ("a\tb\nc\r.png", "http://h/img/abc.png"),
        ("a\u{1}b\u{7F}\u{85}.png", "http://h/img/a%01b%7F%C2%85.png"),
        // Combining marks after a delimiter are still after the delimiter.
        ("a/\u{301}b.png#\u{301}", "http://h/img/a/%CC%81b.png#%CC%81"),
        // The host lowercased, default and empty ports dropped, an empty path is /.
        ("HTTP://Example.COM/A B.png", "http://example.com/A%20B.png"),
        ("http://h:80/x", "http://h/x"), ("https://h:443/x", "https://h/x"), ("https://h:80/x", "https://h:80/x"),
        ("http://h:/x", "http://h/x"), ("http://H", "http://h/"), ("http://[::1]:8080/a b", "http://[::1]:8080/a%20b"),
        ("http://[::1]/x", "http://[::1]/x"),
        ("http://us er:p@ss@h/x", "http://us%20er:p%40ss@h/x"),
    ])
    func encodesAsABrowserDoes(_ example: (String, String)) {
        #expect(FeedDecoder.resolve(example.0, base: Self.base) == example.1, "\(example.0)")
    }

    /// An already-resolved URL resolves to itself: nothing is encoded twice.
    @Test func resolvingIsIdempotent() {
        for url in ["a b.png", "caf\u{E9}.png?q=a b#f g", "%2541.png", "x/%C3%A9.png", "a|b.png?x='y'", "HTTP://H:80"] {
            guard let once = FeedDecoder.resolve(url, base: Self.base) else { Issue.record("\(url)"); continue }
            #expect(FeedDecoder.resolve(once, base: Self.base) == once, "\(url)")
            #expect(FeedDecoder.resolve(once, base: nil) == once, "\(url)")
        }
    }

    /// A special scheme's slashes, as WHATWG counts them.
    @Test func httpWithTooFewOrTooManySlashes() {
        #expect(FeedDecoder.resolve("http:x y.png", base: Self.base) == "http://h/img/x%20y.png")
        #expect(FeedDecoder.resolve("http:/x.png", base: Self.base) == "http://h/x.png")
        #expect(FeedDecoder.resolve("https:cdn/x.png", base: Self.base) == "https://cdn/x.png")
        #expect(FeedDecoder.resolve("http:///Other/x.png", base: Self.base) == "http://other/x.png")
        #expect(FeedDecoder.resolve("https:\\\\\\cdn\\x.png", base: nil) == "https://cdn/x.png")
        #expect(FeedDecoder.resolve("http://", base: Self.base) == nil)
        #expect(FeedDecoder.resolve("http:", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://user@/x", base: Self.base) == nil)
        #expect(FeedDecoder.resolve("http://:80/x", base: Self.base) == nil)
    }

    @Test func hostsAndPortsMustBeHostsAndPorts() {
        #expect(FeedDecoder.resolve("http://a b/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://a<b/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://a%41/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://h:8x/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://h:65536/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://[::1/x", base: nil) == nil)
        #expect(FeedDecoder.resolve("http://h:0080/x", base: nil) == "http://h/x")
        #expect(FeedDecoder.resolve("http://h:08080/x", base: nil) == "http://h:8080/x")
        // Non-ASCII host names are passed on as written (libcurl converts them with IDNA).
        #expect(FeedDecoder.resolve("http://B\u{FC}cher.example/\u{FC}.png", base: nil) == "http://b\u{FC}cher.example/%C3%BC.png")
    }

    /// 20,000 generated references from URL-significant pieces: every result
    /// is printable ASCII without what a browser always encodes, and resolves
    /// to itself.
    @Test func generatedReferencesResolveToCleanIdempotentURLs() {
        let pieces = ["/", "\\", "?", "#", "%", "%41", ".", "..", ":", "@", "[", "]", " ", "\t", "\n", "\u{0}", "\u{7F}",
                      "\u{E9}", "\u{301}", "\u{2028}", "a", "B", "http:", "https:", "//", "H", ":80", "\"", "<", "`", "{", "^", "'"]
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33)
        }
        for _ in 0..<20_000 {
            let reference = (0..<(1 + next() % 8)).map { _ in pieces[next() % pieces.count] }.joined()
            guard let once = FeedDecoder.resolve(reference, base: Self.base) else { continue }
            // Only a host may keep non-ASCII (IDNA is libcurl's).
            let p = URIReference.parse(once)
            let outsideHost = p.path + "?" + (p.query ?? "") + "#" + (p.fragment ?? "")
            let bad = outsideHost.utf8.contains { $0 <= 0x20 || $0 >= 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") }
                || (p.authority ?? "").utf8.contains { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") }
            #expect(!bad, "\(reference.debugDescription) -> \(once.debugDescription)")
            #expect(FeedDecoder.resolve(once, base: Self.base) == once, "\(reference.debugDescription) -> \(once.debugDescription)")
            if bad { break }
        }
    }

    @Test func blankURLsAreNoURL() {
        #expect(FeedDecoder.resolve("   ", base: Self.base) == nil)
        #expect(FeedDecoder.resolve("\t\n", base: Self.base) == nil)
        #expect(FeedDecoder.resolve(" javascript:alert(1)", base: Self.base) == nil)
        #expect(FeedDecoder.resolve("\u{0}file:///etc/passwd", base: Self.base) == nil)
    }

    /// The base is read the same way, so the plain-path shortcut agrees with the parser.
    @Test func theBaseIsReadLikeABrowserToo() {
        let base = FeedDecoder.baseURL(imagesURL: "HTTP://Media.Example:80/my images/list.json", imagesBaseURL: nil)
        #expect(base == "http://media.example/my%20images/")
        #expect(FeedDecoder.resolve("a.png", base: base) == "http://media.example/my%20images/a.png")
        #expect(FeedDecoder.resolve("./a.png", base: base) == "http://media.example/my%20images/a.png")
        #expect(FeedDecoder.baseURL(imagesURL: nil, imagesBaseURL: " https://CDN/x y") == "https://cdn/x%20y/")
    }
}
