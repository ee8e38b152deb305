import Glibc
import Testing
@testable import CacheService
import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// The feed walk driven with pages and no network (docs/protocol.md,
/// "Paging"): each paging kind, its ends, its faults and the "has more"
/// warning. The pages are shaped as the APIs named document theirs.
@Suite struct FeedWalkerTests {
    /// Pages by URL, answered in place; a request whose `If-None-Match`
    /// holds a page's ETag is answered 304. Every request is recorded.
    final class Pages: PageFetching {
        struct Page: Sendable {
            var body: String
            var headers: [String: String] = [:]
            var status = 200
        }
        let pages: [String: Page]
        let requests = Locked<[FetchRequest]>([])
        /// Answers every URL not in `pages` with this page (an origin that ignores a parameter).
        let fallback: Page?

        init(_ pages: [String: Page], fallback: Page? = nil) {
            self.pages = pages
            self.fallback = fallback
        }

        func fetchPage(_ request: FetchRequest, completion: @escaping @Sendable (Result<(HTTPResponse, PageBody), FetchError>) -> Void) {
            requests.withLock { $0.append(request) }
            guard let page = pages[request.url] ?? fallback else {
                completion(.failure(.status(url: request.url, code: 404, attempts: 1, credentials: nil)))
                return
            }
            var headers = page.headers
            if headers["etag"] == nil { headers["etag"] = "\"\(page.body.utf8.count)\"" }
            if let tag = headers["etag"], request.headers.contains("If-None-Match: \(tag)") {
                completion(.success((HTTPResponse(status: 304, headers: headers, bodyBytes: 0, attempts: 1, url: request.url), PageBody([]))))
                return
            }
            completion(.success((HTTPResponse(status: page.status, headers: headers, bodyBytes: Int64(page.body.utf8.count), attempts: 1, url: request.url),
                                 PageBody(Array(page.body.utf8)))))
        }

        var urls: [String] { requests.withLock { $0.map(\.url) } }
    }

    func walk(_ origin: Pages, url: String, shape: FeedShape, stored: [FeedPage] = [], id: JSONPointer = .member("id"))
        -> Result<WalkResult<DecodedPostsPage>, OriginFailure> {
        let walk = PageWalk<DecodedPostsPage>(
            fetch: FeedRefresher.FeedFetch(setting: "posts-url", url: url, feed: .posts), shape: shape, stored: stored, force: false,
            decode: { body, type, room throws(FeedError) in
                let p = try FeedDecoder.postsPage(consuming: body.take(), shape: shape, id: id, contentType: type, room: room)
                return (p, p.facts)
            }, validatorsToStore: { _, r in Validators(etag: r.headers["etag"], lastModified: nil) })
        let out = Locked<Result<WalkResult<DecodedPostsPage>, OriginFailure>?>(nil)
        FeedWalker(walk: walk, fetcher: origin, pageLimit: 1 << 20).run { r in out.withLock { $0 = r } }
        return out.withLock { $0 } ?? .failure(OriginFailure(subject: "test", url: url, reason: "the walk never finished"))
    }

    func ids(_ r: Result<WalkResult<DecodedPostsPage>, OriginFailure>) -> [String] {
        guard case .success(let w) = r else { return [] }
        return w.pages.flatMap { p -> [String] in
            if case .fresh(_, let d) = p { return d.posts.map { $0.id.description } }
            return []
        }
    }

    func pointer(_ s: String) -> JSONPointer { (try? JSONPointer(s)) ?? .member("?") }

    /// A Reddit listing page: the posts under each child's `data`, the cursor at `/data/after`.
    static func reddit(_ ids: [String], after: String?) -> Pages.Page {
        let children = ids.map { #"{"kind":"t3","data":{"id":"\#($0)","name":"t3_\#($0)","title":"post \#($0)"}}"# }.joined(separator: ",")
        let a = after.map { "\"\($0)\"" } ?? "null"
        return .init(body: #"{"kind":"Listing","data":{"after":\#(a),"dist":\#(ids.count),"before":null,"children":[\#(children)]}}"#)
    }

    @Test func aCursorWalkFollowsRedditsAfterUntilItIsNullAndUnwrapsEachPost() throws {
        let base = "https://r.test/r/swift/new.json?limit=2"
        let origin = Pages([
            base: Self.reddit(["a1", "a2"], after: "t3_a2"),
            base + "&after=t3_a2": Self.reddit(["b1", "b2"], after: "t3_b2"),
            base + "&after=t3_b2": Self.reddit(["c1"], after: nil),
        ])
        let shape = FeedShape(prefix: "posts", items: pointer("/data/children"),
                              paging: .cursor(CursorPaging(source: .pointer(pointer("/data/after")), parameter: "after")), item: pointer("/data"))
        let r = walk(origin, url: base, shape: shape)
        #expect(ids(r) == ["a1", "a2", "b1", "b2", "c1"])
        #expect(origin.urls.count == 3)
        if case .success(let w) = r {
            #expect(w.warning == WalkWarning.none)
            if case .fresh(_, let d) = w.pages[0] { #expect(String(decoding: d.posts[0].json, as: UTF8.self) == #"{"id":"a1","name":"t3_a1","title":"post a1"}"#) }
        }
        // Every feed request asks for a feed, JSON first.
        #expect(origin.requests.withLock { $0.allSatisfy { $0.headers.contains(FeedContent.accept) } })
    }

    @Test func theSameListingWithoutPagingSettingsWarnsNamingTheMemberAndTheSetting() {
        let base = "https://r.test/r/swift/new.json"
        let origin = Pages([base: Self.reddit(["a1", "a2"], after: "t3_a2")])
        let r = walk(origin, url: base, shape: FeedShape(prefix: "posts", items: pointer("/data/children"), item: pointer("/data")))
        guard case .success(let w) = r else { Issue.record("\(r)"); return }
        #expect(w.warning.text(feed: "posts") == (#"posts page 1 has more: /data/after = "t3_a2"; set posts-paging = cursor, posts-cursor = /data/after, posts-cursor-param = after"#))
    }

    @Test func stripeEndsWhenHasMoreIsFalseTakingTheCursorFromTheLastItem() {
        let base = "https://api.stripe.test/v1/customers?limit=2"
        func page(_ ids: [String], more: Bool) -> Pages.Page {
            .init(body: #"{"object":"list","url":"/v1/customers","has_more":\#(more),"data":[\#(ids.map { #"{"id":"\#($0)","object":"customer"}"# }.joined(separator: ","))]}"#)
        }
        let origin = Pages([base: page(["cus_1", "cus_2"], more: true), base + "&starting_after=cus_2": page(["cus_3", "cus_4"], more: true),
                            base + "&starting_after=cus_4": page(["cus_5"], more: false)])
        let shape = FeedShape(prefix: "posts", items: pointer("/data"),
                              paging: .cursor(CursorPaging(source: .lastItem(pointer("/id")), parameter: "starting_after", hasMore: pointer("/has_more"))))
        #expect(ids(walk(origin, url: base, shape: shape)).count == 5)
        #expect(origin.urls.count == 3)
    }

    @Test func aCursorInAResponseHeaderIsSentBackPercentEncoded() {
        let base = "https://h.test/items"
        let origin = Pages([base: .init(body: #"[{"id":1},{"id":2}]"#, headers: ["x-next-cursor": "a b/c=="]),
                            base + "?cursor=a%20b%2Fc%3D%3D": .init(body: #"[{"id":3}]"#)])
        let shape = FeedShape(prefix: "posts", paging: .cursor(CursorPaging(source: .header("x-next-cursor"))))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3"])
    }

    @Test func aCursorThatRepeatsFailsNamingThePages() {
        let base = "https://b.test/feed"
        let origin = Pages([base: .init(body: #"{"feed":[{"id":1}],"cursor":"x"}"#), base + "?cursor=x": .init(body: #"{"feed":[{"id":2}],"cursor":"x"}"#)])
        let shape = FeedShape(prefix: "posts", items: pointer("/feed"), paging: .cursor(CursorPaging(source: .pointer(pointer("/cursor")))))
        guard case .failure(let f) = walk(origin, url: base, shape: shape) else { Issue.record("a repeating cursor was walked"); return }
        #expect(f.description.contains("page 2 leads to https://b.test/feed?cursor=x again (page 2's request)"))
    }

    @Test func contentfulsOffsetWalkEndsAtTheTotalKeepingTheOtherParameters() {
        let base = "https://cdn.test/spaces/s/entries?access_token=k&limit=2"
        func page(_ skip: Int, _ ids: [Int]) -> Pages.Page {
            .init(body: #"{"sys":{"type":"Array"},"total":5,"skip":\#(skip),"limit":2,"items":[\#(ids.map { #"{"sys":{"id":"e\#($0)"}}"# }.joined(separator: ","))]}"#)
        }
        let origin = Pages([base + "&skip=0": page(0, [1, 2]), base + "&skip=2": page(2, [3, 4]), base + "&skip=4": page(4, [5])])
        let shape = FeedShape(prefix: "posts", items: pointer("/items"),
                              paging: .offset(OffsetPaging(offsetParameter: "skip", limitParameter: "limit", total: .pointer(pointer("/total")))))
        #expect(ids(walk(origin, url: base, shape: shape, id: pointer("/sys/id"))) == ["e1", "e2", "e3", "e4", "e5"])
        #expect(origin.urls == [base + "&skip=0", base + "&skip=2", base + "&skip=4"])
    }

    /// A total repeated in every row (SQL's `COUNT(*) OVER ()`, as many
    /// hand-written APIs page): `posts-total = /0/total_count` points into
    /// the items, which the parse keeps as ranges, not values (issue 34).
    /// It read as nothing, and the walk ended after page 1 saying nothing.
    @Test func aTotalInsideTheFirstItemIsReadFromThatItem() {
        let base = "https://rows.test/posts?limit=2"
        func page(_ ids: [Int]) -> Pages.Page {
            .init(body: "[" + ids.map { #"{"id":\#($0),"total_count":4}"# }.joined(separator: ",") + "]")
        }
        // Full pages to the end: only the total says page 2 is the last.
        let origin = Pages([base + "&offset=0": page([1, 2]), base + "&offset=2": page([3, 4])])
        let shape = FeedShape(prefix: "posts", paging: .offset(OffsetPaging(total: .pointer(pointer("/0/total_count")))))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3", "4"])
        #expect(origin.urls == [base + "&offset=0", base + "&offset=2"])
    }

    /// A cursor and a has-more flag inside the wrapped items array, at an
    /// index: read from that element of the page, whichever page it is.
    @Test func aCursorInsideTheItemsArrayIsReadFromThatElement() {
        let base = "https://wrap.test/feed"
        func page(_ ids: [String], cursor: String?) -> Pages.Page {
            let more = cursor != nil
            let next = cursor.map { "\"" + $0 + "\"" } ?? "null"
            let items = ids.map { #"{"id":"\#($0)"}"# } + [#"{"meta":{"next":\#(next),"more":\#(more)}}"#]
            return .init(body: #"{"result":[\#(items.joined(separator: ","))]}"#)
        }
        let origin = Pages([base: page(["a", "b"], cursor: "c2"), base + "?cursor=c2": page(["c", "d"], cursor: nil)])
        let shape = FeedShape(prefix: "posts", items: pointer("/result"),
                              paging: .cursor(CursorPaging(source: .pointer(pointer("/result/2/meta/next")), hasMore: pointer("/result/2/meta/more"))))
        let r = walk(origin, url: base, shape: shape)
        #expect(origin.urls == [base, base + "?cursor=c2"])
        guard case .success(let w) = r else { Issue.record("\(r)"); return }
        #expect(w.pages.count == 2)
    }

    @Test func aShortPageEndsAnOffsetWalkWithAPageSize() {
        let base = "https://j.test/posts"
        let origin = Pages([base + "?_start=0&_limit=2": .init(body: #"[{"id":1},{"id":2}]"#),
                            base + "?_start=2&_limit=2": .init(body: #"[{"id":3}]"#)])
        let shape = FeedShape(prefix: "posts", paging: .offset(OffsetPaging(offsetParameter: "_start", limitParameter: "_limit", pageSize: 2)))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3"])
        #expect(origin.urls.count == 2)
    }

    @Test func anOriginThatIgnoresTheOffsetFailsInsteadOfWalkingTheSamePageAgain() {
        let shape = FeedShape(prefix: "posts", paging: .offset(OffsetPaging(pageSize: 2)))
        let origin = Pages([:], fallback: .init(body: #"[{"id":1},{"id":2}]"#))
        guard case .failure(let f) = walk(origin, url: "https://o.test/p", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.contains("page 2 holds the same items as page 1"))
        #expect(origin.urls.count == 2)
    }

    @Test func algoliaPagesFromZeroUntilNbPages() {
        let base = "https://hn.test/api/v1/search_by_date?tags=story"
        func page(_ n: Int) -> Pages.Page {
            .init(body: #"{"hits":[{"objectID":"\#(n)a"},{"objectID":"\#(n)b"}],"page":\#(n),"nbPages":3,"hitsPerPage":2}"#)
        }
        let origin = Pages([base + "&page=0": page(0), base + "&page=1": page(1), base + "&page=2": page(2)])
        let shape = FeedShape(prefix: "posts", items: pointer("/hits"), paging: .page(PageNumberPaging(start: 0, totalPages: .pointer(pointer("/nbPages")))))
        #expect(ids(walk(origin, url: base, shape: shape, id: pointer("/objectID"))).count == 6)
        #expect(origin.urls.count == 3)
    }

    /// WordPress answers 400 `rest_post_invalid_page_number` past its last
    /// page, so a page walk must stop at `X-WP-TotalPages` (FEEDS.md; the
    /// newcomer's try had no way to read it and the walk failed at page 4).
    @Test func wordpressPagesUntilTheTotalPagesHeader() {
        let base = "https://wp.test/wp-json/wp/v2/posts?per_page=2"
        func page(_ ids: [Int]) -> Pages.Page {
            .init(body: "[" + ids.map { #"{"id":\#($0),"title":{"rendered":"p\#($0)"}}"# }.joined(separator: ",") + "]",
                  headers: ["x-wp-total": "5", "x-wp-totalpages": " 3 "])
        }
        let gone = Pages.Page(body: #"{"code":"rest_post_invalid_page_number","message":"The page number requested is larger than the number of pages available.","data":{"status":400}}"#, status: 400)
        let origin = Pages([base + "&page=1": page([1, 2]), base + "&page=2": page([3, 4]), base + "&page=3": page([5]), base + "&page=4": gone])
        let shape = FeedShape(prefix: "posts", paging: .page(PageNumberPaging(totalPages: .header("x-wp-totalpages"))))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3", "4", "5"])
        #expect(origin.urls == [base + "&page=1", base + "&page=2", base + "&page=3"])
        // Without the header's count the walk asks page 4 and fails on its 400, never silently.
        let unbounded = Pages([base + "&page=1": page([1, 2]), base + "&page=2": page([3, 4]), base + "&page=3": page([5]), base + "&page=4": gone])
        guard case .failure = walk(unbounded, url: base, shape: FeedShape(prefix: "posts", paging: .page(PageNumberPaging()))) else {
            Issue.record("a 400 past the last page was taken for the end"); return
        }
    }

    /// A feed whose headers count more pages than were read (WordPress
    /// behind a proxy that drops `Link`, GitLab's `X-Next-Page`) is no
    /// silent first page: the walk stores page 1 and says how to go on.
    @Test func pageCountHeadersAreASignOfMore() {
        let base = "https://wp.test/wp-json/wp/v2/posts"
        let wp = Pages([base: .init(body: #"[{"id":1}]"#, headers: ["x-wp-total": "30", "x-wp-totalpages": "3"])])
        guard case .success(let w) = walk(wp, url: base, shape: FeedShape(prefix: "posts")) else { Issue.record("failed"); return }
        #expect(w.warning.text(feed: "posts") == "posts page 1 has more: header X-WP-TotalPages = 3; set posts-paging = page, posts-total-pages = header:X-WP-TotalPages")
        let gitlab = Pages([base: .init(body: #"[{"id":1}]"#, headers: ["x-next-page": "2", "x-total-pages": ""])])
        guard case .success(let g) = walk(gitlab, url: base, shape: FeedShape(prefix: "posts")) else { Issue.record("failed"); return }
        #expect(g.warning.text(feed: "posts") == #"posts page 1 has more: header X-Next-Page = "2"; set posts-paging = cursor, posts-cursor = header:X-Next-Page, posts-cursor-param = page"#)
        // The last page of the count, and an empty next page, say nothing.
        let last = Pages([base: .init(body: #"[{"id":1}]"#, headers: ["x-wp-totalpages": "1", "x-next-page": ""])])
        guard case .success(let l) = walk(last, url: base, shape: FeedShape(prefix: "posts")) else { Issue.record("failed"); return }
        #expect(l.warning == WalkWarning.none)
        // A walk begun at page 2 that reads pages 2 and 3 of 3 ended at the last
        // (the review: it warned, counting the pages it read, not their numbers).
        let counted = ["x-wp-totalpages": "3"]
        let fromTwo = Pages([base + "?page=2": .init(body: #"[{"id":2}]"#, headers: counted.merging(["link": "<\(base)?page=3>; rel=\"next\""]) { a, _ in a }),
                             base + "?page=3": .init(body: #"[{"id":3}]"#, headers: counted)])
        guard case .success(let t) = walk(fromTwo, url: base + "?page=2", shape: FeedShape(prefix: "posts")) else { Issue.record("failed"); return }
        #expect(t.warning == WalkWarning.none, "\(String(describing: t.warning.text(feed: "posts")))")
        // Configured paging reads what it was set to: the headers are no sign for it.
        let offset = Pages([base + "?offset=0": .init(body: #"[{"id":1}]"#, headers: counted), base + "?offset=1": .init(body: "[]", headers: counted)])
        guard case .success(let o) = walk(offset, url: base, shape: FeedShape(prefix: "posts", paging: .offset(OffsetPaging()))) else {
            Issue.record("failed"); return
        }
        #expect(o.warning == WalkWarning.none)
    }

    /// json-server's `X-Total-Count` ends an offset walk whose pages are all full.
    @Test func anOffsetWalkEndsAtATotalCountHeader() {
        let base = "https://j.test/posts"
        func page(_ ids: [Int]) -> Pages.Page {
            .init(body: "[" + ids.map { #"{"id":\#($0)}"# }.joined(separator: ",") + "]", headers: ["x-total-count": "4"])
        }
        let origin = Pages([base + "?_start=0&_limit=2": page([1, 2]), base + "?_start=2&_limit=2": page([3, 4])])
        let shape = FeedShape(prefix: "posts", paging: .offset(OffsetPaging(offsetParameter: "_start", limitParameter: "_limit", pageSize: 2,
                                                                           total: .header("x-total-count"))))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3", "4"])
        #expect(origin.urls.count == 2, "no request past the total")
    }

    /// A count that is not a whole number from 0 fails the refresh naming
    /// the setting and the value; a page without the header, or with it
    /// empty, walks on.
    @Test func aCountHeaderThatIsNoNumberFails() {
        let base = "https://wp.test/posts"
        let shape = FeedShape(prefix: "posts", paging: .page(PageNumberPaging(totalPages: .header("x-wp-totalpages"))))
        let refused = [("many", #"posts-total-pages header:x-wp-totalpages is "many", not a whole number"#),
                       ("99999999999999999999", #"is "99999999999999999999", more than 2^63 - 1"#),
                       ("-1", "posts-total-pages header:x-wp-totalpages is -1: a count is never negative")]
        for (value, message) in refused {
            let origin = Pages([base + "?page=1": .init(body: #"[{"id":1}]"#, headers: ["x-wp-totalpages": value])])
            guard case .failure(let f) = walk(origin, url: base, shape: shape) else { Issue.record("walked: \(value)"); continue }
            #expect(f.description.contains(message), "\(f)")
        }
        for headers in [[:], ["x-wp-totalpages": " "]] {
            let origin = Pages([base + "?page=1": .init(body: #"[{"id":1}]"#, headers: headers), base + "?page=2": .init(body: "[]")])
            #expect(ids(walk(origin, url: base, shape: shape)) == ["1"], "\(headers)")
        }
        // A negative count in the page is refused the same way.
        let negative = Pages([base + "?page=1": .init(body: #"{"items":[{"id":1}],"pages":-2}"#)])
        let inPage = FeedShape(prefix: "posts", items: pointer("/items"), paging: .page(PageNumberPaging(totalPages: .pointer(pointer("/pages")))))
        guard case .failure(let f) = walk(negative, url: base, shape: inPage) else { Issue.record("walked"); return }
        #expect(f.description.contains("posts-total-pages /pages is -2: a count is never negative"), "\(f)")
        // A whole number past Int64 in the page is named so, not "not a whole number".
        let huge = Pages([base + "?page=1": .init(body: #"{"items":[{"id":1}],"pages":99999999999999999999999}"#)])
        guard case .failure(let h) = walk(huge, url: base, shape: inPage) else { Issue.record("walked"); return }
        #expect(h.description.contains("posts-total-pages /pages is 99999999999999999999999, more than 2^63 - 1"), "\(h)")
    }

    @Test func lemmyPagesUntilAnEmptyPage() {
        let base = "https://l.test/api/v3/post/list?sort=New"
        func page(_ ids: [Int]) -> Pages.Page {
            .init(body: #"{"posts":[\#(ids.map { #"{"post":{"id":\#($0),"name":"p\#($0)"},"creator":{"id":9},"counts":{"comments":0}}"# }.joined(separator: ","))]}"#)
        }
        let origin = Pages([base + "&page=1": page([1, 2]), base + "&page=2": page([3]), base + "&page=3": page([])])
        let shape = FeedShape(prefix: "posts", items: pointer("/posts"), paging: .page(PageNumberPaging()), item: pointer("/post"))
        #expect(ids(walk(origin, url: base, shape: shape)) == ["1", "2", "3"])
    }

    @Test func morePagesThanTheLimitFail() {
        let shape = FeedShape(prefix: "posts", maxPages: 3, paging: .page(PageNumberPaging()))
        var pages: [String: Pages.Page] = [:]
        for n in 1...10 { pages["https://p.test/x?page=\(n)"] = .init(body: "[{\"id\":\(n)}]") }
        let origin = Pages(pages)
        guard case .failure(let f) = walk(origin, url: "https://p.test/x", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description == "posts-url page 4 https://p.test/x?page=4: more than posts-max-pages 3 pages; page 4 holds 1 item", "\(f)")
        #expect(origin.urls.count == 4, "page 4 is asked, to learn whether it ends the feed; page 5 never")
    }

    /// A feed of exactly `posts-max-pages` pages fits, though its walk ends
    /// with one request more (an empty page: Lemmy, json-server's `_start`,
    /// Mastodon's last `Link`); the newcomer's try found it refused.
    @Test func aFeedOfExactlyTheMaxPagesEndsAtItsEmptyPage() {
        let base = "https://l.test/api/v3/post/list?limit=2"
        func page(_ ids: [Int]) -> Pages.Page { .init(body: #"{"posts":[\#(ids.map { #"{"post":{"id":\#($0)}}"# }.joined(separator: ","))]}"#) }
        let pages = [base + "&page=1": page([1, 2]), base + "&page=2": page([3, 4]), base + "&page=3": page([5, 6]), base + "&page=4": page([])]
        let shape = FeedShape(prefix: "posts", items: pointer("/posts"), maxPages: 3, paging: .page(PageNumberPaging()), item: pointer("/post"))
        #expect(ids(walk(Pages(pages), url: base, shape: shape)) == ["1", "2", "3", "4", "5", "6"])
        // A fourth page of posts is one more.
        var more = pages
        more[base + "&page=4"] = page([7])
        more[base + "&page=5"] = page([])
        guard case .failure(let f) = walk(Pages(more), url: base, shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.hasSuffix("more than posts-max-pages 3 pages; page 4 holds 1 item"), "\(f)")
    }

    /// Issue 33: sixteen pages of `{"id":N}` made two million posts. The
    /// items of all pages together are bounded, and a page past the bound
    /// is refused while it is parsed, before its posts are built.
    @Test func moreItemsThanTheLimitFailNamingTheSetting() {
        let shape = FeedShape(prefix: "posts", paging: .page(PageNumberPaging()), maxItems: 5)
        var pages: [String: Pages.Page] = [:]
        for n in 1...3 { pages["https://p.test/x?page=\(n)"] = .init(body: "[{\"id\":\(2 * n)},{\"id\":\(2 * n + 1)}]") }
        pages["https://p.test/x?page=4"] = .init(body: "[]")
        let origin = Pages(pages)
        guard case .failure(let f) = walk(origin, url: "https://p.test/x", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.contains("page 3 https://p.test/x?page=3: the feed holds more than posts-max-items 5 items: this page has more than the 1 left to it; raise posts-max-items"), "\(f)")
        #expect(origin.urls.count == 3)
        // Exactly at the bound is fine.
        var exact = shape
        exact.maxItems = 6
        guard case .success(let w) = walk(Pages(pages), url: "https://p.test/x", shape: exact) else { Issue.record("failed at the bound"); return }
        #expect(w.pages.count == 4)
    }

    @Test func aPageAnswered304CountsItsStoredItemsAgainstTheLimit() {
        let base = "https://b.test/feed"
        let shape = FeedShape(prefix: "posts", items: pointer("/feed"), paging: .cursor(CursorPaging(source: .pointer(pointer("/cursor")))), maxItems: 4)
        let origin = Pages([base: .init(body: #"{"feed":[{"id":1}],"cursor":"c2"}"#, headers: ["etag": "\"p1\""]),
                            base + "?cursor=c2": .init(body: #"{"feed":[{"id":2}]}"#)])
        // Stored under a larger bound: the 304 page stands for 4 posts.
        let stored = [FeedPage(url: base, validators: Validators(etag: "\"p1\""), next: base + "?cursor=c2", count: 4)]
        guard case .failure(let f) = walk(origin, url: base, shape: shape, stored: stored) else { Issue.record("walked"); return }
        #expect(f.description.contains("page 2 \(base)?cursor=c2: the feed holds more than posts-max-items 4 items: this page has more than the 0 left to it"), "\(f)")
    }

    @Test func aPageAnswered304KeepsTheNextRequestItMadeBefore() {
        let base = "https://b.test/feed"
        let shape = FeedShape(prefix: "posts", items: pointer("/feed"), paging: .cursor(CursorPaging(source: .pointer(pointer("/cursor")))))
        let origin = Pages([base: .init(body: #"{"feed":[{"id":1}],"cursor":"c2"}"#, headers: ["etag": "\"p1\""]),
                            base + "?cursor=c2": .init(body: #"{"feed":[{"id":2}]}"#)])
        let stored = [FeedPage(url: base, validators: Validators(etag: "\"p1\""), next: base + "?cursor=c2", count: 1)]
        guard case .success(let w) = walk(origin, url: base, shape: shape, stored: stored) else { Issue.record("failed"); return }
        #expect(w.pages.count == 2)
        if case .unchanged = w.pages[0] {} else { Issue.record("page 1 was not 304") }
        #expect(origin.urls == [base, base + "?cursor=c2"])
    }

    @Test func anHTMLAnswerFailsNamingItsContentType() {
        let origin = Pages(["https://d.test/latest": .init(body: "<!DOCTYPE html><html><body>Latest</body></html>", headers: ["content-type": "text/html; charset=utf-8"])])
        guard case .failure(let f) = walk(origin, url: "https://d.test/latest", shape: FeedShape(prefix: "posts")) else { Issue.record("walked"); return }
        #expect(f.description.contains("an HTML page (Content-Type: text/html)"))
        #expect(f.description.contains("Accept: application/json"))
    }

    @Test func moreHintsPreferANextPageOverHasMoreAndSuggestTheRightSetting() throws {
        let slack = try JSONParser.parse(Array(#"{"ok":true,"messages":[],"has_more":true,"response_metadata":{"next_cursor":"bmV4dA=="}}"#.utf8))
        #expect(MoreHint.find(in: slack, prefix: "posts", followed: [])?.warning(feed: "posts", page: 1)
                == #"posts page 1 has more: /response_metadata/next_cursor = "bmV4dA=="; set posts-paging = cursor, posts-cursor = /response_metadata/next_cursor"#)
        let discourse = try JSONParser.parse(Array(#"{"topic_list":{"more_topics_url":"/latest?page=1","topics":[]}}"#.utf8))
        #expect(MoreHint.find(in: discourse, prefix: "posts", followed: [])?.advice == "set posts-next = /topic_list/more_topics_url")
        let stripe = try JSONParser.parse(Array(#"{"has_more":true,"data":[]}"#.utf8))
        #expect(MoreHint.find(in: stripe, prefix: "images", followed: [])?.advice.hasPrefix("set images-paging = cursor with images-has-more = /has_more") == true)
        let done = try JSONParser.parse(Array(#"{"has_more":false,"next":null,"cursor":""}"#.utf8))
        #expect(MoreHint.find(in: done, prefix: "posts", followed: []) == nil)
        let followed = try JSONParser.parse(Array(#"{"links":{"next":"/p/2"}}"#.utf8))
        #expect(MoreHint.find(in: followed, prefix: "posts", followed: ["/links/next"]) == nil)
    }

    @Test func queryParametersAreSetKeepingTheOthersAndReadBack() {
        #expect(QueryParameters.setting("page", to: "2", in: "https://a.test/p?key=k&page=1&x=y#f") == "https://a.test/p?key=k&page=2&x=y#f")
        #expect(QueryParameters.setting("after", to: "t3_x", in: "https://a.test/p") == "https://a.test/p?after=t3_x")
        #expect(QueryParameters.setting("c", to: "a+b/c?&=", in: "https://a.test/?c=1&c=2") == "https://a.test/?c=a%2Bb%2Fc%3F%26%3D")
        #expect(QueryParameters.value("skip", in: "https://a.test/p?limit=2&skip=40") == "40")
        #expect(QueryParameters.value("c", in: "https://a.test/?c=a%2Bb") == "a+b")
        #expect(QueryParameters.value("nope", in: "https://a.test/?c=1") == nil)
    }
}

/// RSS and Atom through the same decoding as JSON: entries become posts by
/// their JSON Feed `id`, and RFC 5005's `rel="next"` is followed like a `Link`.
@Suite struct XMLFeedWalkTests {
    @Test func anAtomArchiveIsWalkedByItsNextLinksAndEachEntryIsAPost() {
        func atom(_ ids: [Int], next: String?) -> FeedWalkerTests.Pages.Page {
            let entries = ids.map { "<entry><id>urn:e:\($0)</id><title>E\($0)</title><updated>2024-01-0\($0)T00:00:00Z</updated>"
                + "<link rel=\"enclosure\" type=\"image/png\" href=\"/i/\($0).png\"/></entry>" }.joined()
            let link = next.map { "<link rel=\"next\" href=\"\($0)\"/>" } ?? ""
            return .init(body: "<?xml version=\"1.0\"?><feed xmlns=\"http://www.w3.org/2005/Atom\"><title>T</title>\(link)\(entries)</feed>",
                         headers: ["content-type": "application/atom+xml"])
        }
        let origin = FeedWalkerTests.Pages(["https://a.test/feed.atom": atom([1, 2], next: "feed-2.atom"),
                                            "https://a.test/feed-2.atom": atom([3], next: nil)])
        let t = FeedWalkerTests()
        let r = t.walk(origin, url: "https://a.test/feed.atom", shape: FeedShape(prefix: "posts"))
        #expect(t.ids(r) == ["urn:e:1", "urn:e:2", "urn:e:3"])
        guard case .success(let w) = r, case .fresh(_, let d) = w.pages[0] else { Issue.record("\(r)"); return }
        #expect(String(decoding: d.posts[0].json, as: UTF8.self).contains(#""image":"/i/1.png""#))
        let m = try? FeedDecoder.manifestPage(Array(atom([1], next: nil).body.utf8), shape: FeedShape(prefix: "images"),
                                              fields: ItemFields(imageURL: .member("image"), imageDescription: .member("title")))
        #expect(m?.entries == [ManifestEntry(url: "/i/1.png", description: "E1")])
    }

    @Test func aBillionLaughsPageFailsTheWalk() {
        let laughs = """
        <?xml version="1.0"?><!DOCTYPE rss [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
        <rss version="2.0"><channel><title>&b;</title></channel></rss>
        """
        let origin = FeedWalkerTests.Pages(["https://a.test/rss": .init(body: laughs)])
        let t = FeedWalkerTests()
        guard case .failure(let f) = t.walk(origin, url: "https://a.test/rss", shape: FeedShape(prefix: "posts")) else { Issue.record("walked"); return }
        #expect(f.description.contains("entity declarations are refused"))
    }
}

/// What a hostile review found the walk doing wrong, each held.
@Suite struct FeedWalkerReviewTests {
    let t = FeedWalkerTests()
    func pointer(_ s: String) -> JSONPointer { (try? JSONPointer(s)) ?? .member("?") }

    @Test func anOriginThatCapsTheLimitIsWalkedToItsEnd() {
        // Asked for 10 a page, it gives 5: the first page is not taken for the last.
        var pages: [String: FeedWalkerTests.Pages.Page] = [:]
        for (offset, ids) in [(0, 1...5), (5, 6...10), (10, 11...12)] {
            pages["https://c.test/items?offset=\(offset)&limit=10"] = .init(body: "{\"items\":[\(ids.map { "{\"id\":\($0)}" }.joined(separator: ","))]}")
        }
        let shape = FeedShape(prefix: "posts", items: pointer("/items"), paging: .offset(OffsetPaging(pageSize: 10)))
        #expect(t.ids(t.walk(FeedWalkerTests.Pages(pages), url: "https://c.test/items", shape: shape)).count == 12)
    }

    @Test func hasMoreWithNoCursorFailsInsteadOfEndingSilently() {
        let origin = FeedWalkerTests.Pages(["https://s.test/v1/c": .init(body: #"{"has_more":true,"data":[{"id":"cus_1"}]}"#)])
        let shape = FeedShape(prefix: "posts", items: pointer("/data"),
                              paging: .cursor(CursorPaging(source: .lastItem(pointer("/ID")), parameter: "starting_after", hasMore: pointer("/has_more"))))
        guard case .failure(let f) = t.walk(origin, url: "https://s.test/v1/c", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.contains("posts-has-more /has_more is true but posts-cursor-last /ID of the last item gives no cursor"))
    }

    @Test func anEmptyPageWithACursorGoesOn() {
        let origin = FeedWalkerTests.Pages(["https://s.test/h": .init(body: #"{"messages":[],"response_metadata":{"next_cursor":"c2"}}"#),
                                            "https://s.test/h?cursor=c2": .init(body: #"{"messages":[{"ts":"1.2"}],"response_metadata":{"next_cursor":""}}"#)])
        let shape = FeedShape(prefix: "posts", items: pointer("/messages"), paging: .cursor(CursorPaging(source: .pointer(pointer("/response_metadata/next_cursor")))))
        #expect(t.ids(t.walk(origin, url: "https://s.test/h", shape: shape, id: pointer("/ts"))) == ["1.2"])
    }

    @Test func aHugeCursorIsRefusedAndTheErrorStaysShort() {
        let big = String(repeating: "c", count: 1 << 20)
        let origin = FeedWalkerTests.Pages(["https://b.test/f": .init(body: "{\"items\":[{\"id\":1}],\"cursor\":\"\(big)\"}")])
        let shape = FeedShape(prefix: "posts", items: pointer("/items"), paging: .cursor(CursorPaging(source: .pointer(pointer("/cursor")))))
        guard case .failure(let f) = t.walk(origin, url: "https://b.test/f", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.contains("a cursor of 1048576 bytes, more than 4096"))
        #expect(f.description.utf8.count < 1000)
        // A next URL of a megabyte in a Link header: refused, quoted in part.
        let linked = FeedWalkerTests.Pages(["https://b.test/l": .init(body: "[{\"id\":1}]", headers: ["link": "</l?x=\(big)>; rel=\"next\""])])
        guard case .failure(let g) = t.walk(linked, url: "https://b.test/l", shape: FeedShape(prefix: "posts")) else { Issue.record("walked"); return }
        #expect(g.description.contains("more than 8192") && g.description.utf8.count < 1000)
    }

    @Test func jsonAPIPageParametersKeepTheirSpellingAndAreNotSentTwice() {
        #expect(QueryParameters.setting("page[number]", to: "2", in: "https://j.test/a?page[number]=1&page[size]=5") == "https://j.test/a?page[number]=2&page[size]=5")
        #expect(QueryParameters.setting("page[number]", to: "2", in: "https://j.test/a?page%5Bnumber%5D=1") == "https://j.test/a?page%5Bnumber%5D=2")
        #expect(QueryParameters.setting("page[cursor]", to: "a/b", in: "https://j.test/a") == "https://j.test/a?page[cursor]=a%2Fb")
        #expect(QueryParameters.value("page[number]", in: "https://j.test/a?page%5Bnumber%5D=3") == "3")
    }

    @Test func anRSSFeedUnderAnotherPagingKindWarnsToUseLink() {
        func rss(_ items: String) -> FeedWalkerTests.Pages.Page {
            .init(body: #"<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>T</title><atom:link rel="next" href="/feed?paged=2"/>"#
                  + items + "</channel></rss>")
        }
        let pages = FeedWalkerTests.Pages(["https://r.test/feed?page=1": rss("<item><guid>a</guid></item>"), "https://r.test/feed?page=2": rss("")])
        guard case .success(let w) = t.walk(pages, url: "https://r.test/feed", shape: FeedShape(prefix: "posts", paging: .page(PageNumberPaging()))) else {
            Issue.record("failed"); return
        }
        #expect(w.warning.text(feed: "posts") == #"posts page 2 has more: <link rel="next"> = "/feed?paged=2"; set posts-paging = link"#)
    }

}

extension FeedWalkerReviewTests {
    /// The newcomer's mistake of issue 32: Reddit's cursor taken for a next
    /// URL was fetched as a relative URL and answered 404; now it says what to set.
    @Test func aCursorGivenAsPostsNextIsRefusedNamingTheCursorSettings() {
        let origin = FeedWalkerTests.Pages(["https://r.test/new.json": FeedWalkerTests.reddit(["a"], after: "t3_a")])
        let shape = FeedShape(prefix: "posts", items: pointer("/data/children"), next: pointer("/data/after"), item: pointer("/data"))
        guard case .failure(let f) = t.walk(origin, url: "https://r.test/new.json", shape: shape) else { Issue.record("walked"); return }
        #expect(f.description.contains(#"posts-next /data/after is "t3_a", a cursor rather than a URL: set posts-paging = cursor, posts-cursor = /data/after"#))
        #expect(origin.urls.count == 1)
    }
}

extension FeedWalkerReviewTests {
    /// Issue 33's dripping origin: pages that each come within the transfer
    /// timeout, but never end. feed-timeout bounds the whole walk.
    @Test func aWalkPastFeedTimeoutFailsNamingThePageItReached() {
        final class Slow: PageFetching {
            func fetchPage(_ request: FetchRequest, completion: @escaping @Sendable (Result<(HTTPResponse, PageBody), FetchError>) -> Void) {
                usleep(40_000)
                let n = (Int(QueryParameters.value("page", in: request.url) ?? "1") ?? 1)
                let body = Array("[{\"id\":\(n)}]".utf8)
                completion(.success((HTTPResponse(status: 200, headers: [:], bodyBytes: Int64(body.count), attempts: 1, url: request.url), PageBody(body))))
            }
        }
        let walk = PageWalk<DecodedPostsPage>(
            fetch: FeedRefresher.FeedFetch(setting: "posts-url", url: "https://d.test/p", feed: .posts),
            shape: FeedShape(prefix: "posts", paging: .page(PageNumberPaging())), stored: [], force: false,
            decode: { body, type, room throws(FeedError) in
                let p = try FeedDecoder.postsPage(body.take(), shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: type)
                return (p, p.facts)
            }, validatorsToStore: { _, _ in Validators() })
        let out = Locked<Result<WalkResult<DecodedPostsPage>, OriginFailure>?>(nil)
        FeedWalker(walk: walk, fetcher: Slow(), pageLimit: 1 << 20, timeout: .milliseconds(100)).run { r in out.withLock { $0 = r } }
        guard case .failure(let f)? = out.withLock({ $0 }) else { Issue.record("a walk of endless pages ended without failing"); return }
        #expect(f.description.contains("the refresh took more than feed-timeout 0.1 s; it had read"), "\(f)")
    }
}
