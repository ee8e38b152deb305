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

    func search(_ q: String, offset: Int = 0, limit: Int? = nil, index: TitleIndex? = nil) -> PostsPage {
        PostSearch(q).page(of: Self.posts, titles: index ?? TitleIndex(generation: 0, posts: Self.posts), offset: offset, limit: limit)
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

    @Test func offsetAndLimitPageTheMatchesAndTotalCountsThemAll() {
        #expect(search("needle", offset: 1, limit: 1).ids == [.int(3)])
        #expect(search("needle", offset: 1, limit: 1).total == 3)
        #expect(search("needle", offset: 3).ids.isEmpty)
        #expect(search("needle", offset: 0, limit: 0).total == 3)
    }

    @Test func aPostTheIndexDoesNotKnowIsReadFromItsJSON() {
        let old = TitleIndex(generation: 0, posts: Array(Self.posts.prefix(2)))
        #expect(search("needle", index: old).ids == [.int(2), .int(3), .int(5)])
        #expect(old.titles[.int(1)] == Array("sunt aut facere".utf8))
        #expect(TitleIndex(generation: 0, posts: Self.posts).titles[.int(4)] == [], "no title: an empty entry, never parsed again")
    }

    @Test func bytesMatchLikeText() {
        #expect(PostSearch.contains(Array("abcabd".utf8), Array("abd".utf8)))
        #expect(!PostSearch.contains(Array("ab".utf8), Array("abc".utf8)))
        #expect(PostSearch.contains([], []))
        #expect(!PostSearch.contains(Array("abcab".utf8), Array("bb".utf8)))
    }
}
