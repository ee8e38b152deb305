import Testing
@testable import CacheService
@testable import CacheStore
import CacheProtocol
import CacheSystem

/// `list_posts`'s `query` over posts in memory: the title each post has
/// (`PostTitle`, found when the post is stored) and the match ignoring case.
@Suite struct PostSearchTests {
    static func post(_ id: Int, _ json: String) -> (id: PostID, json: [UInt8]) { (.int(Int64(id)), Array(json.utf8)) }

    static let posts = [
        post(1, #"{"id":1,"title":"Sunt aut facere","body":"needle in the body only"}"#),
        post(2, #"{"id":2,"title":{"rendered":"A <b>Needle</b> &amp; thread"}}"#),
        post(3, #"{"id":3,"title":"\u00c9lan NEEDLE"}"#),
        post(4, #"{"id":4,"content":"no title: needle"}"#),
        post(5, #"{"id":5,"title":"needles"}"#),
        post(6, #"{"id":6,"title":7}"#),
    ]

    /// The ids, in the given order, of the posts whose title holds `q`.
    static func search(_ q: String, in posts: [(id: PostID, json: [UInt8])]) -> [PostID] {
        var table = PostTable()
        for p in posts { table.set(p.id, p.json) }
        let needle = PostSearch(q).needle
        return posts.map(\.id).filter { table.title(at: table.slot(of: $0)!, holds: needle) }
    }

    /// The title as the JSON parser reads it (the rule docs/protocol.md
    /// states, spelled out the slow way): what the quick scan must agree with.
    static func parsedTitle(_ json: [UInt8]) -> String? {
        guard let post = try? JSONParser.parse(json) else { return nil }
        if let title = post["title"] { return title.string ?? title["rendered"]?.string }
        return post["name"]?.string ?? post["record"]?["text"]?.string ?? post["text"]?.string
    }

    @Test func theTitleAloneIgnoringCaseStringOrRendered() {
        #expect(Self.search("NeEdLe", in: Self.posts) == [.int(2), .int(3), .int(5)], "the body, a post without title and a number title do not match")
        // Unicode case: the escape's É matches é; the rendered title's markup is text like any other.
        #expect(Self.search("éla", in: Self.posts) == [.int(3)])
        #expect(Self.search("<b>needle", in: Self.posts) == [.int(2)])
        #expect(Self.search("absent", in: Self.posts).isEmpty)
        #expect(Self.search("", in: Self.posts).count == 6, "an empty query holds every post")
    }

    /// Posts of feeds that have no `title` (issue 32's unwrapped items): Lemmy's
    /// `name`, Bluesky's `record.text`, Slack's and X's `text`; a `title` wins.
    @Test func withoutATitleTheNameOrTheTextIsSearched() {
        let posts = [
            Self.post(1, #"{"id":1,"name":"Lemmy needle","url":"https://l.test"}"#),
            Self.post(2, #"{"uri":"at://did/app.bsky.feed.post/1","record":{"text":"a Bluesky needle","createdAt":"2024-01-01T00:00:00Z"}}"#),
            Self.post(3, #"{"ts":"1512085950.000216","text":"Slack needle"}"#),
            Self.post(4, #"{"id":4,"title":"titled","name":"needle in the name only"}"#),
        ]
        #expect(Self.search("NEEDLE", in: posts) == [.int(1), .int(2), .int(3)])
    }

    /// Shapes the quick scan must read as the parser does: a repeated member
    /// (the last counts), an escaped key, escapes and non-ASCII in the title,
    /// white space, nesting before the title, a title past 64 KiB into the post.
    @Test func theQuickScanAgreesWithTheParser() {
        let far = String(repeating: "x", count: 70_000)
        let shapes = [
            #"{"title":"first needle","title":"Second"}"#,
            #"{"title":"Second","title":"first NEEDLE"}"#,
            #"{"\u0074itle":"Escaped Key Needle"}"#,
            #"{"title":"Quote \" and \\ NEEDLE \/ tab\t"}"#,
            #"{ "id" : 1 , "title" : "Spaced Needle" }"#,
            #"{"meta":{"title":"inner needle","a":[1,{"b":"}"}]},"title":"outer"}"#,
            #"{"body":"\#(far)","title":"Far NEEDLE"}"#,
            #"{"title":"ÀÉÎ NEEDLE ǅ"}"#,
            #"{"title":{"rendered":7},"name":"needle"}"#,
            #"{"title":null,"text":"needle"}"#,
            #"{"record":{"text":7},"text":"needle text"}"#,
            #"{"name":["needle"],"record":{"text":"Needle record"}}"#,
            #"{"title":""}"#,
            #"[{"title":"needle"}]"#,
            #"{"title":"\ud83d\ude00 NEEDLE"}"#,
        ]
        for (i, shape) in shapes.enumerated() {
            let json = Array(shape.utf8)
            for q in ["needle", "NEEDLE", "first", "second", "àéî", "ǆ", "\u{1F600}", "e", ""] {
                let expected = Self.parsedTitle(json).map { q.isEmpty || $0.lowercased().contains(q.lowercased()) } ?? q.isEmpty
                let found = !Self.search(q, in: [(.int(Int64(i)), json)]).isEmpty
                #expect(found == expected, "\(shape.prefix(80)) query \(q)")
            }
        }
    }
}

/// The service's search over a real store: it follows the posts.
@Suite struct ServiceSearchTests {
    @Test func aSearchBeforeAPrefetchDoesNotHideThePostsItStores() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        #expect(s.posts(offset: 0, limit: nil, query: "qui").total == 0, "nothing stored yet")
        _ = try await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }.get()
        let all = s.posts(offset: 0, limit: nil)
        let expected = zip(all.ids, all.posts).filter { (_, json) in
            (PostSearchTests.parsedTitle(json) ?? "").lowercased().contains("qui")
        }
        let found = s.posts(offset: 0, limit: nil, query: "QUI")
        #expect(found.total == expected.count && found.total > 3, "\(found.total) of \(expected.count)")
        #expect(found.ids == expected.map(\.0) && Array(found.posts) == expected.map(\.1), "in list order, the stored bytes")
        let page = s.posts(offset: 2, limit: 2, query: "qui")
        #expect(page.total == expected.count && page.ids == expected[2..<4].map(\.0))
        #expect(s.posts(offset: 1, limit: 0, query: "qui").total == expected.count && s.posts(offset: expected.count, limit: nil, query: "qui").ids.isEmpty)
    }
}
