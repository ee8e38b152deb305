import Testing
@testable import CacheService
import CacheSystem

/// `list_posts`'s `query` over posts in memory (PostSearch, TitleIndex).
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

    /// The search as the service makes its page: the matches' ids, then their JSON.
    func search(_ q: String, offset: Int = 0, limit: Int? = nil) -> PostsPage {
        let (total, ids) = PostSearch(q).matches(in: TitleIndex(generation: 0, posts: Self.posts), offset: offset, limit: limit)
        let json = Dictionary(uniqueKeysWithValues: Self.posts.map { ($0.id, $0.json) })
        return PostsPage(total: total, ids: ids, posts: ids.map { json[$0]! })
    }

    @Test func theTitleAloneIgnoringCaseStringOrRendered() {
        let page = search("NeEdLe")
        #expect(page.ids == [.int(2), .int(3), .int(5)], "the body, a post without title and a number title do not match")
        #expect(page.total == 3)
        #expect(page.posts == [Self.posts[1].json, Self.posts[2].json, Self.posts[4].json], "the stored bytes, as they are")
        // Unicode case: the escape's É matches é; the rendered title's markup is text like any other.
        #expect(search("éla").ids == [.int(3)])
        #expect(search("<b>needle").ids == [.int(2)])
        #expect(search("absent").total == 0)
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
        let (total, ids) = PostSearch("NEEDLE").matches(in: TitleIndex(generation: 0, posts: posts), offset: 0, limit: nil)
        #expect(total == 3 && ids == [.int(1), .int(2), .int(3)])
    }

    @Test func offsetAndLimitPageTheMatchesAndTotalCountsThemAll() {
        #expect(search("needle", offset: 1, limit: 1).ids == [.int(3)])
        #expect(search("needle", offset: 1, limit: 1).total == 3)
        #expect(search("needle", offset: 3).ids.isEmpty)
        #expect(search("needle", offset: 0, limit: 0).total == 3)
    }

    @Test func theIndexKeepsListOrderAndAnEmptyTitleForAPostWithout() {
        let index = TitleIndex(generation: 3, posts: Self.posts)
        #expect(index.generation == 3)
        #expect(index.entries.map(\.id) == Self.posts.map(\.id))
        #expect(index.entries[0].title == Array("sunt aut facere".utf8))
        #expect(index.entries[3].title.isEmpty && index.entries[5].title.isEmpty, "no title, or a number: empty, matching nothing")
    }

    @Test func bytesMatchLikeText() {
        #expect(PostSearch.contains(Array("abcabd".utf8), Array("abd".utf8)))
        #expect(!PostSearch.contains(Array("ab".utf8), Array("abc".utf8)))
        #expect(PostSearch.contains([], []))
        #expect(!PostSearch.contains(Array("abcab".utf8), Array("bb".utf8)))
    }
}

/// The service's search over a real store: the index follows the posts.
@Suite struct ServiceSearchTests {
    @Test func aSearchBeforeAPrefetchDoesNotHideThePostsItStores() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        #expect(s.posts(offset: 0, limit: nil, query: "qui").total == 0, "nothing stored yet (an index of no posts)")
        _ = try await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }.get()
        let all = s.posts(offset: 0, limit: nil)
        let expected = zip(all.ids, all.posts).filter { (_, json) in
            (TitleIndex.title(json) ?? "").lowercased().contains("qui")
        }
        let found = s.posts(offset: 0, limit: nil, query: "QUI")
        #expect(found.total == expected.count && found.total > 3, "\(found.total) of \(expected.count)")
        #expect(found.ids == expected.map(\.0) && found.posts == expected.map(\.1), "in list order, the stored bytes")
        let page = s.posts(offset: 2, limit: 2, query: "qui")
        #expect(page.total == expected.count && page.ids == expected[2..<4].map(\.0))
    }
}
