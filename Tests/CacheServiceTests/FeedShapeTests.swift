import Testing
@testable import CacheService
import CacheProtocol
import CacheSystem

/// Feeds as real APIs shape them (docs/operations.md, "Feeds in the wild").
@Suite struct FeedShapeTests {
    func shape(items: String? = nil, next: String? = nil) throws -> FeedShape {
        FeedShape(prefix: "posts", items: try items.map { try JSONPointer($0) }, next: try next.map { try JSONPointer($0) })
    }

    @Test func aJSONFeedNeedsNoSettingItsItemsAndNextURLAreFound() throws {
        let feed = """
        {"version": "https://jsonfeed.org/version/1.1", "title": "T", "next_url": "page2.json",
         "items": [{"id": "https://example.org/2024/01/a", "content_text": "A", "image": "a.png"},
                   {"id": "https://example.org/2024/01/b", "content_html": "<p>B</p>"}]}
        """
        let d = try decodePosts(feed)
        #expect(d.posts.map(\.id) == [.string("https://example.org/2024/01/a"), .string("https://example.org/2024/01/b")])
        #expect(d.next == "page2.json")
        let m = try FeedDecoder.manifestPage(Array(feed.utf8), shape: FeedShape(prefix: "images"), fields: ItemFields(imageURL: .member("image")))
        #expect(m.entries.map(\.url) == ["a.png", ""])
    }

    @Test func jsonFeedVersionOneAlsoCounts() throws {
        let d = try decodePosts(#"{"version":"https://jsonfeed.org/version/1","items":[{"id":"1"}]}"#)
        #expect(d.posts.map(\.id) == [.string("1")])
    }

    @Test func anObjectThatIsNoJSONFeedNamesItsArraysAndTheSetting() {
        #expect(throws: FeedError("expected a JSON array of posts, or a JSON Feed, but the document is an object with an array at /data; set posts-items to the JSON Pointer of the array")) {
            try decodePosts(#"{"data":[{"id":1}],"links":{"next":null}}"#)
        }
    }

    @Test func aWrappedArrayWithAJSONAPINextLink() throws {
        let body = #"{"data":[{"id":"1","type":"posts"},{"id":"2","type":"posts"}],"links":{"next":"/posts?page[number]=2"}}"#
        let d = try decodePosts(body, shape: try shape(items: "/data", next: "/links/next"))
        #expect(d.posts.map(\.id) == [.string("1"), .string("2")])
        #expect(d.next == "/posts?page[number]=2")
        #expect(String(decoding: d.posts[1].json, as: UTF8.self) == #"{"id":"2","type":"posts"}"#)
        // The last page: null, "", or no member at all.
        for last in [#"{"data":[],"links":{"next":null}}"#, #"{"data":[],"links":{"next":""}}"#, #"{"data":[],"links":{}}"#] {
            #expect(try decodePosts(last, shape: try shape(items: "/data", next: "/links/next")).next == nil)
        }
        // JSON:API 1.1 link objects.
        #expect(try decodePosts(#"{"data":[],"links":{"next":{"href":"/p/3"}}}"#, shape: try shape(items: "/data", next: "/links/next")).next == "/p/3")
        #expect(throws: FeedError("posts-next /links/next is a number, not a URL (a string, or null on the last page)")) {
            try decodePosts(#"{"data":[],"links":{"next":5}}"#, shape: try shape(items: "/data", next: "/links/next"))
        }
    }

    @Test func algoliaHitsWithObjectIDs() throws {
        let body = #"{"hits":[{"objectID":"a1b2","title":"x"},{"objectID":"c3","title":"y"}],"page":0,"nbPages":1}"#
        let d = try decodePosts(body, shape: try shape(items: "/hits"), id: .member("objectID"))
        #expect(d.posts.map(\.id) == [.string("a1b2"), .string("c3")])
    }

    @Test func aPointerToNoArrayNamesThePointerAndWhatIsThere() throws {
        let body = #"{"data":{"items":{"id":1}},"n":[1]}"#
        #expect(throws: FeedError("posts-items /data is an object, not an array")) { try decodePosts(body, shape: try shape(items: "/data")) }
        #expect(throws: FeedError(#"posts-items /posts names nothing: the document is an object with no member "posts""#)) {
            try decodePosts(body, shape: try shape(items: "/posts"))
        }
        #expect(throws: FeedError("posts-items /data/items is an object, not an array")) { try decodePosts(body, shape: try shape(items: "/data/items")) }
        #expect(throws: FeedError("posts-items /n/0/x names nothing: /n/0 is a number")) { try decodePosts(body, shape: try shape(items: "/n/0/x")) }
    }

    @Test func stringIdsOfEveryKindAreKeptAndBadOnesCounted() throws {
        let long = String(repeating: "x", count: PostID.maxStringBytes)
        let body = #"[{"id":"a/b"},{"id":".."},{"id":"-x"},{"id":"é🙂"},{"id":"\#(long)"},{"id":"\#(long)y"},{"id":""},{"id":{"x":1}},{"id":true},{"id":12345678901234567890}]"#
        let d = try decodePosts(body)
        #expect(d.posts.map(\.id) == [.string("a/b"), .string(".."), .string("-x"), .string("é🙂"), .string(long)])
        #expect(d.invalid == 5)
    }

    @Test func anIdPointerCanReachIntoTheItem() throws {
        let d = try decodePosts(#"[{"meta":{"key":7}},{"meta":{}}]"#, id: try JSONPointer("/meta/key"))
        #expect(d.posts.map(\.id) == [.int(7)])
        #expect(d.problems == [#"element 1 has no "/meta/key""#])
    }

    @Test func wordpressTitlesAreKeptAsTheyCame() throws {
        let d = try decodePosts(#"[{"id":10,"title":{"rendered":"Hello &amp; welcome"}}]"#)
        #expect(String(decoding: d.posts[0].json, as: UTF8.self) == #"{"id":10,"title":{"rendered":"Hello &amp; welcome"}}"#)
    }

    @Test func thePhotosManifestReadsItsOwnFields() throws {
        let body = #"[{"albumId":1,"id":1,"title":"accusamus","url":"https://via/600/92c952","thumbnailUrl":"https://via/150/92c952"}]"#
        let fields = ItemFields(imageURL: .member("thumbnailUrl"), imageDescription: .member("title"))
        let m = try FeedDecoder.manifestPage(Array(body.utf8), shape: FeedShape(prefix: "images"), fields: fields)
        #expect(m.entries == [ManifestEntry(url: "https://via/150/92c952", description: "accusamus")])
    }
}
