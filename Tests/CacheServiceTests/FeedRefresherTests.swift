import Foundation
import Testing
@testable import CacheService
import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// `FeedRefresher` alone: a real store in a temporary directory and an
/// origin the test shapes and changes between refreshes (Reddit's listing
/// pages, as FeedWalkerTests draws them from Reddit's documentation), so
/// each decision the refresher owns is seen: one walk for refreshes (and
/// first reads) asked together, what a 304 writes, what a failed page
/// leaves, validators after a URL or settings change (and for an origin
/// that cannot match its own ETag), the "has more" warning across a
/// restart, a damaged `feeds.state`, the manifest's own pages, one walk for
/// two feeds that share pages (never stored over a newer manifest), a
/// history feed's early stop and `posts-min-free-space`.
@Suite struct FeedRefresherTests {
    /// Pages by URL that the test may change or hold; an ETag is derived
    /// from each body and a request sending it back is answered 304.
    final class Origin: PageFetching {
        typealias Page = FeedWalkerTests.Pages.Page
        typealias Answer = @Sendable (Result<(HTTPResponse, PageBody), FetchError>) -> Void
        let pages: Locked<[String: Page]>
        let requests = Locked<[FetchRequest]>([])
        /// While set, requests wait in `held` until `release`.
        let holding = Locked(false)
        let held = Locked<[(FetchRequest, Answer)]>([])
        /// URLs answered 200 with the same ETag even when it is sent back
        /// (Apache's mod_deflate, bug 45023: it cannot match its own tags).
        let ignoringTheirETags = Locked<Set<String>>([])

        init(_ pages: [String: Page]) { self.pages = Locked(pages) }

        func fetchPage(_ request: FetchRequest, completion: @escaping Answer) {
            requests.withLock { $0.append(request) }
            if holding.withLock({ $0 }) { held.withLock { $0.append((request, completion)) }; return }
            answer(request, completion)
        }

        func release() {
            holding.withLock { $0 = false }
            for (request, completion) in held.withLock({ h in defer { h = [] }; return h }) { answer(request, completion) }
        }

        private func answer(_ request: FetchRequest, _ completion: Answer) {
            guard let page = pages.withLock({ $0[request.url] }) else {
                completion(.failure(.status(url: request.url, code: 404, attempts: 1, credentials: nil)))
                return
            }
            if page.status >= 400 {
                completion(.failure(.status(url: request.url, code: page.status, attempts: 1, credentials: nil)))
                return
            }
            let tag = "\"\(Hash128(of: Array(page.body.utf8)).hex.prefix(16))\""
            let headers = page.headers.merging(["etag": tag]) { a, _ in a }
            if request.headers.contains("If-None-Match: \(tag)"), !ignoringTheirETags.withLock({ $0.contains(request.url) }) {
                completion(.success((HTTPResponse(status: 304, headers: headers, bodyBytes: 0, attempts: 1, url: request.url), PageBody([]))))
                return
            }
            let body = Array(page.body.utf8)
            completion(.success((HTTPResponse(status: 200, headers: headers, bodyBytes: Int64(body.count), attempts: 1, url: request.url), PageBody(body))))
        }

        /// The requests since the last call: whether each sent validators, and an ETag among them.
        @discardableResult func taken() -> [(url: String, conditional: Bool, etag: Bool)] {
            requests.withLock { r in
                defer { r = [] }
                return r.map { request in
                    let etag = request.headers.contains { $0.hasPrefix("If-None-Match") }
                    return (request.url, etag || request.headers.contains { $0.hasPrefix("If-Modified-Since") }, etag)
                }
            }
        }
    }

    static let base = "https://r.test/r/swift/new.json?limit=2"
    static let listing = FeedShape(prefix: "posts", items: try! JSONPointer("/data/children"),
                                   paging: .cursor(CursorPaging(source: .pointer(try! JSONPointer("/data/after")), parameter: "after")),
                                   item: try! JSONPointer("/data"))

    /// Reddit's three pages of five posts.
    static func reddit() -> [String: Origin.Page] {
        [base: FeedWalkerTests.reddit(["a1", "a2"], after: "t3_a2"),
         base + "&after=t3_a2": FeedWalkerTests.reddit(["b1", "b2"], after: "t3_b2"),
         base + "&after=t3_b2": FeedWalkerTests.reddit(["c1"], after: nil)]
    }

    final class Setup {
        let directory: String
        let store: Store
        let origin: Origin
        let configuration: Locked<FeedConfiguration>
        let counters = Locked(CounterValues())
        let largeWalks = Locked(0)
        private(set) var refresher: FeedRefresher!

        init(_ pages: [String: Origin.Page], configuration: FeedConfiguration) throws {
            var template = Array("/tmp/cached-refresher-XXXXXX".utf8CString)
            directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
            store = try Store(StoreConfiguration(directory: directory))
            origin = Origin(pages)
            self.configuration = Locked(configuration)
            restart()
        }

        /// A new refresher over the same store, as after a restart.
        func restart() {
            let configuration = configuration, counters = counters, largeWalks = largeWalks
            refresher = FeedRefresher(store: store, pages: origin, log: Logger(level: .error, environment: [:]),
                                      onWorker: { $0() }, settings: { configuration.withLock { $0 } }, credentials: { "" },
                                      count: { change in counters.withLock { change(&$0) } },
                                      largeWalkEnded: { largeWalks.withLock { $0 += 1 } })
        }

        deinit {
            store.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        func refreshPosts(force: Bool = false) -> Result<PostsRefresh, CacheError>? {
            let out = Locked<Result<PostsRefresh, CacheError>?>(nil)
            refresher.refreshPosts(force: force) { r in out.withLock { $0 = r } }
            return out.withLock { $0 }
        }

        var storedIDs: [String] { store.postsInFeedOrder().map(\.id.description) }
    }

    static func posts(_ url: String? = base, shape: FeedShape = listing) -> FeedConfiguration {
        FeedConfiguration(postsURL: url, imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: shape)
    }

    @Test func aPagedFeedIsStoredWholeAndARefreshOfUnchangedPagesWritesNothing() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        let first = try #require(s.refreshPosts()).get().summary
        #expect(first.fetched == 5 && s.storedIDs == ["a1", "a2", "b1", "b2", "c1"])
        #expect(s.store.postPages.map(\.count) == [2, 2, 1])
        #expect(s.origin.taken().map(\.conditional) == [false, false, false])
        let generation = s.store.postsGeneration
        let second = try #require(s.refreshPosts()).get().summary
        #expect(second.unchanged == 5 && second.fetched == 0)
        #expect(s.origin.taken().map(\.conditional) == [true, true, true])
        #expect(s.store.postsGeneration == generation, "a refresh of unchanged pages stored something")
    }

    @Test func refreshesAskedTogetherShareOneWalk() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        s.origin.holding.withLock { $0 = true }
        let results = Locked<[Result<PostsRefresh, CacheError>]>([])
        for _ in 0..<3 { s.refresher.refreshPosts(force: false) { r in results.withLock { $0.append(r) } } }
        #expect(s.origin.held.withLock { $0.count } == 1)
        #expect(s.counters.withLock { $0.coalesced } == 2)
        s.origin.release()
        let all = results.withLock { $0 }
        #expect(all.count == 3 && all.allSatisfy { (try? $0.get().summary.fetched) == 5 })
        #expect(s.origin.taken().count == 3, "one walk of three pages")
    }

    @Test func aFailingPageStoresNothingAndCountsAnUpstreamError() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        _ = try #require(s.refreshPosts()).get()
        s.origin.pages.withLock {
            $0[Self.base] = FeedWalkerTests.reddit(["n1", "a1"], after: "t3_a1")
            $0[Self.base + "&after=t3_a1"] = .init(body: "", status: 500)
        }
        let walksBefore = s.largeWalks.withLock { $0 }
        guard case .failure(.origin(let f)) = try #require(s.refreshPosts()) else { Issue.record("a failed page was stored"); return }
        #expect(f.description.contains("500"))
        #expect(s.storedIDs == ["a1", "a2", "b1", "b2", "c1"], "what the failed walk read was stored")
        #expect(s.counters.withLock { $0.upstreamErrors } == 1)
        #expect(s.largeWalks.withLock { $0 } == walksBefore + 1, "a failed walk's memory is not trimmed")
    }

    /// Two marks see to it: the URL is in the settings' digest, and
    /// `apply` marks the feed before the new settings take effect (the
    /// next test holds the second alone).
    @Test func aNewURLIsAskedWithoutTheOldURLsValidatorsOnce() throws {
        let page = Origin.Page(body: #"[{"id":1},{"id":2}]"#)
        let old = "https://a.test/feed.json", new = "https://b.test/feed.json"
        let s = try Setup([old: page, new: page], configuration: Self.posts(old, shape: FeedShape(prefix: "posts")))
        _ = try #require(s.refreshPosts()).get()
        #expect(s.store.postPages.map(\.url) == [""], "one page is stored as version 1 stores it")
        let changed = Self.posts(new, shape: FeedShape(prefix: "posts"))
        s.refresher.apply(changed, was: s.configuration.withLock { $0 }) { s.configuration.withLock { $0 = changed } }
        s.origin.taken()
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map(\.conditional) == [false], "the old URL's validators went to the new one")
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map(\.conditional) == [true])
    }

    @Test func aRefreshBetweenTheMarkAndTheNewSettingsSendsNoValidators() throws {
        let page = Origin.Page(body: #"[{"id":1}]"#)
        let old = "https://a.test/feed.json", new = "https://b.test/feed.json"
        let s = try Setup([old: page, new: page], configuration: Self.posts(old, shape: FeedShape(prefix: "posts")))
        _ = try #require(s.refreshPosts()).get()
        s.origin.taken()
        let changed = Self.posts(new, shape: FeedShape(prefix: "posts"))
        s.refresher.apply(changed, was: s.configuration.withLock { $0 }) {
            // Still the old URL and the same digest: only the mark keeps the validators back.
            _ = s.refreshPosts()
            s.configuration.withLock { $0 = changed }
        }
        #expect(s.origin.taken().map { "\($0.url) \($0.conditional)" } == ["\(old) false"], "the old URL's validators were sent")
        // Once: the old URL asked again sends them (the mark is spent).
        s.configuration.withLock { $0 = Self.posts(old, shape: FeedShape(prefix: "posts")) }
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map(\.conditional) == [true])
    }

    @Test func anOriginThatCannotMatchItsOwnETagIsAskedByDateUntilItsURLChanges() throws {
        let url = "https://apache.test/feed.json", other = "https://apache.test/other.json"
        let page = Origin.Page(body: #"[{"id":1}]"#, headers: ["last-modified": "Sun, 06 Dec 2026 10:00:00 GMT"])
        let s = try Setup([url: page, other: page], configuration: Self.posts(url, shape: FeedShape(prefix: "posts")))
        s.origin.ignoringTheirETags.withLock { $0 = [url, other] }
        _ = try #require(s.refreshPosts()).get()
        _ = try #require(s.refreshPosts()).get()  // sends the ETag, is answered 200 with it
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map { [$0.conditional, $0.etag] } == [[false, false], [true, true], [true, false]])
        s.restart()  // the mark is stored with the validators
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map { [$0.conditional, $0.etag] } == [[true, false]])
        // Another URL is another origin's answer: its ETag is tried again.
        let moved = Self.posts(other, shape: FeedShape(prefix: "posts"))
        s.refresher.apply(moved, was: s.configuration.withLock { $0 }) { s.configuration.withLock { $0 = moved } }
        _ = try #require(s.refreshPosts()).get()
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map { [$0.conditional, $0.etag] } == [[false, false], [true, true]])
    }

    @Test func changedSettingsAskEveryPageWithoutValidators() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        _ = try #require(s.refreshPosts()).get()
        // Ids read from another member: the stored pages' posts are not what these settings read.
        s.configuration.withLock { $0.fields.postID = .member("name") }
        s.origin.taken()
        let after = try #require(s.refreshPosts()).get().summary
        #expect(s.origin.taken().map(\.conditional) == [false, false, false])
        #expect(after.fetched == 5 && after.removed == 5 && s.storedIDs.first == "t3_a1")
        // Recorded: the next refresh under the same settings sends validators again.
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().first?.conditional == true)
    }

    @Test func aHasMoreWarningOutlivesARestartUntilTheSettingsChange() throws {
        let unpaged = FeedShape(prefix: "posts", items: try JSONPointer("/data/children"), item: try JSONPointer("/data"))
        let s = try Setup(Self.reddit(), configuration: Self.posts(shape: unpaged))
        let summary = try #require(s.refreshPosts()).get().summary
        #expect(summary.warnings.count == 1 && summary.warnings[0].contains("set posts-paging = cursor"))
        s.restart()
        #expect(s.refresher.feedWarnings() == summary.warnings, "feeds.state did not carry the warning")
        s.configuration.withLock { $0.postsShape = Self.listing }
        #expect(s.refresher.feedWarnings().isEmpty, "a warning outlived the settings that asked for it")
        let paged = try #require(s.refreshPosts()).get().summary
        #expect(paged.warnings.isEmpty && paged.fetched == 3)
    }

    @Test func twoFeedsSharingPagesAreWalkedOnce() throws {
        let url = "https://s.test/items.json"
        let shape = { (prefix: String) in FeedShape(prefix: prefix, items: try! JSONPointer("/items"), next: try! JSONPointer("/next")) }
        func page(_ ids: [Int], next: String?) -> Origin.Page {
            let items = ids.map { #"{"id":\#($0),"url":"https://img.test/\#($0).png"}"# }.joined(separator: ",")
            return .init(body: #"{"items":[\#(items)],"next":\#(next.map { "\"\($0)\"" } ?? "null")}"#)
        }
        var configuration = FeedConfiguration(postsURL: url, imagesURL: url, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                              postsShape: shape("posts"), imagesShape: shape("images"))
        configuration.postsKeep = .feed
        let s = try Setup([url: page([1, 2], next: url + "?p=2"), url + "?p=2": page([3], next: nil)], configuration: configuration)
        let refresh = try #require(s.refreshPosts()).get()
        let shared = try #require(refresh.manifest, "the posts' walk did not hand its pages to the manifest")
        #expect(s.origin.taken().count == 2)
        let rows = Locked<Result<Int, CacheError>?>(nil)
        s.refresher.refreshManifest(force: false, walked: shared) { r in rows.withLock { $0 = r } }
        #expect(try #require(rows.withLock { $0 }).get() == 3)
        #expect(s.origin.taken().isEmpty, "the manifest walked pages the posts had just walked")
        #expect(s.store.rows(offset: 0, limit: 10).page.map(\.url) == (1...3).map { "https://img.test/\($0).png" })
    }

    static func manifestPage(_ n: ClosedRange<Int>, next: String?) -> Origin.Page {
        let items = n.map { #"{"url":"https://img.test/\#($0).png"}"# }.joined(separator: ",")
        return .init(body: #"{"items":[\#(items)],"next":\#(next.map { "\"\($0)\"" } ?? "null")}"#)
    }

    static func manifest(_ url: String) -> FeedConfiguration {
        FeedConfiguration(postsURL: nil, imagesURL: url, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                          imagesShape: FeedShape(prefix: "images", items: try! JSONPointer("/items"), next: try! JSONPointer("/next")))
    }

    func refreshManifest(_ s: Setup, walked: SharedManifest? = nil) -> Result<Int, CacheError>? {
        let rows = Locked<Result<Int, CacheError>?>(nil)
        s.refresher.refreshManifest(force: false, walked: walked) { r in rows.withLock { $0 = r } }
        return rows.withLock { $0 }
    }

    @Test func theManifestsPagesAreStoredAsOneAndPagesThatAnswer304KeepTheirRows() throws {
        let url = "https://m.test/images.json"
        let s = try Setup([url: Self.manifestPage(1...2, next: url + "?p=2"), url + "?p=2": Self.manifestPage(3...3, next: nil)],
                          configuration: Self.manifest(url))
        #expect(try #require(refreshManifest(s)).get() == 3)
        #expect(s.store.manifestPages.map(\.count) == [2, 1])
        s.origin.pages.withLock { $0[url + "?p=2"] = Self.manifestPage(3...4, next: nil) }
        s.origin.taken()
        #expect(try #require(refreshManifest(s)).get() == 4)
        #expect(s.origin.taken().map(\.conditional) == [true, true])
        #expect(s.store.rows(offset: 0, limit: 10).page.map(\.url) == (1...4).map { "https://img.test/\($0).png" },
                "page 1 answered 304 and lost its rows")
    }

    @Test func pagesWalkedOverAnOlderManifestAreNotStoredOverANewerOne() throws {
        let url = "https://s.test/items.json"
        var configuration = Self.manifest(url)
        configuration.postsURL = url
        configuration.postsShape = FeedShape(prefix: "posts", items: try JSONPointer("/items"), next: try JSONPointer("/next"))
        configuration.fields.postID = .member("url")
        let s = try Setup([url: Self.manifestPage(1...2, next: nil)], configuration: configuration)
        let refresh = try #require(s.refreshPosts()).get()
        let shared = try #require(refresh.manifest)
        // Meanwhile the manifest's own refresh stores a newer one.
        s.origin.pages.withLock { $0[url] = Self.manifestPage(1...3, next: nil) }
        #expect(try #require(refreshManifest(s)).get() == 3)
        s.origin.taken()
        #expect(try #require(refreshManifest(s, walked: shared)).get() == 3, "the older pages were stored")
        #expect(s.origin.taken().count == 1, "it did not walk the pages itself")
    }

    @Test func firstReadsShareOneRefreshAndAKnownFeedIsNotFetchedAgain() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        s.origin.holding.withLock { $0 = true }
        let done = Locked(0)
        for _ in 0..<2 { s.refresher.ensurePosts { r in if case .success = r { done.withLock { $0 += 1 } } } }
        s.origin.release()
        #expect(done.withLock { $0 } == 2 && s.origin.taken().count == 3)
        s.refresher.ensurePosts { r in if case .success = r { done.withLock { $0 += 1 } } }
        #expect(done.withLock { $0 } == 3 && s.origin.taken().isEmpty)
    }

    @Test func aRefreshThatWouldLeaveLessThanPostsMinFreeSpaceKeepsThePosts() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        _ = try #require(s.refreshPosts()).get()
        s.origin.pages.withLock { $0[Self.base] = FeedWalkerTests.reddit(["n1", "a2"], after: "t3_a2") }
        s.configuration.withLock { $0.postsMinFreeSpace = Int64.max / 2 }
        guard case .failure(.store) = try #require(s.refreshPosts()) else { Issue.record("stored under posts-min-free-space"); return }
        #expect(s.storedIDs == ["a1", "a2", "b1", "b2", "c1"])
    }

    @Test func aDamagedFeedsStateIsTakenAsAbsent() throws {
        let s = try Setup(Self.reddit(), configuration: Self.posts())
        _ = try #require(s.refreshPosts()).get()
        try Array("not a feeds.state".utf8).withUnsafeBytes { bytes in
            let fd = open(s.directory + "/feeds.state", O_WRONLY | O_TRUNC)
            defer { close(fd) }
            try #require(fd >= 0 && write(fd, bytes.baseAddress, bytes.count) == bytes.count)
        }
        s.restart()
        s.origin.taken()
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map(\.conditional) == [false, false, false], "settings not known were trusted")
        _ = try #require(s.refreshPosts()).get()
        #expect(s.origin.taken().map(\.conditional) == [true, true, true], "the state was not written again")
    }

    @Test func aHistoryFeedStopsAtItsFirstPageOfNothingNew() throws {
        var configuration = Self.posts()
        configuration.postsKeep = .all
        let s = try Setup(Self.reddit(), configuration: configuration)
        _ = try #require(s.refreshPosts()).get()
        s.origin.taken()
        let again = try #require(s.refreshPosts()).get().summary
        #expect(s.origin.taken().count == 1, "a history feed read on past its first page of nothing new")
        #expect(again.fetched == 0 && s.storedIDs == ["a1", "a2", "b1", "b2", "c1"])
        // A new post on page 1 is read, and the walk stops at page 2 (nothing new there).
        s.origin.pages.withLock { $0[Self.base] = FeedWalkerTests.reddit(["n1", "a1"], after: "t3_a1") }
        s.origin.pages.withLock { $0[Self.base + "&after=t3_a1"] = FeedWalkerTests.reddit(["a2", "b1"], after: "t3_b1") }
        let newer = try #require(s.refreshPosts()).get().summary
        #expect(newer.fetched == 1 && s.origin.taken().count == 2)
        #expect(s.storedIDs.first == "n1" && Set(s.storedIDs) == ["n1", "a1", "a2", "b1", "b2", "c1"])
    }

    @Test func aFeedWithNoURLIsNotConfigured() throws {
        let s = try Setup([:], configuration: Self.posts(nil))
        guard case .failure(.notConfigured(let setting)) = try #require(s.refreshPosts()) else { Issue.record("refreshed a feed with no URL"); return }
        #expect(setting == "posts-url" && s.origin.taken().isEmpty && !s.store.postsKnown)
    }
}
