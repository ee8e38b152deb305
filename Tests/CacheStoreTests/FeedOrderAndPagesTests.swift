import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The posts' list and feed order, the feeds' pages, and refreshes that
/// change nothing (docs/storage-format.md, "index.log").
@Suite struct FeedOrderAndPagesTests {
    static func posts(_ ids: [PostID]) -> [(id: PostID, json: [UInt8])] { ids.map { ($0, Array("{\"id\":\"\($0)\"}".utf8)) } }
    static func logLength(_ dir: TempDir) throws -> Int { try FileSystem.read(dir.path + "/index.log").count }
    static let twoPages = [FeedPage(url: "https://o.test/p", validators: Validators(etag: "\"1\""), next: "https://o.test/p?2", count: 2),
                           FeedPage(url: "https://o.test/p?2", validators: Validators(lastModified: "Tue, 01 Dec 2026 06:00:00 GMT"), count: 1)]

    /// `check` on the store, after a reopen, and after a compaction and a reopen.
    static func throughReopenAndCompaction(_ dir: TempDir, _ check: (Store) -> Void) throws {
        var store = try Store(StoreConfiguration(directory: dir.path))
        check(store)
        _ = try store.compact()
        check(store)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        check(store)
    }

    @Test func allIntegerIdsAreListedAscendingWhateverTheFeedOrder() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let feed: [PostID] = [.int(3), .int(-7), .int(10), .int(1)]
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts(feed), pages: [FeedPage(url: "u", next: "v", count: 3), FeedPage(url: "v", count: 1)])
        store.close()
        try Self.throughReopenAndCompaction(dir) { s in
            #expect(s.posts(offset: 0, limit: 9).page.map(\.json) == Self.posts([.int(-7), .int(1), .int(3), .int(10)]).map(\.json))
            #expect(s.posts(offset: 1, limit: 2).page.map(\.json) == Self.posts([.int(1), .int(3)]).map(\.json))
            #expect(s.postsInFeedOrder().map(\.id) == feed)
            #expect(s.postPages == [FeedPage(url: "u", next: "v", count: 3), FeedPage(url: "v", count: 1)])
        }
    }

    /// What a refresh reads of the stored posts: a range of the feed
    /// order (clamped), the count, and the two ends of the first N
    /// (of those stored when fewer are).
    @Test func partsOfTheFeedOrderAreReadWithoutTheRest() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let feed: [PostID] = [.string("z"), .int(2), .string("a"), .int(1)]
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts(Self.posts(feed), pages: Self.twoPages + [FeedPage(url: "w", count: 1)])
        #expect(store.postCount == 4)
        #expect(store.postsInFeedOrder(1..<3).map(\.id) == [.int(2), .string("a")])
        #expect(store.postsInFeedOrder(3..<9).map(\.id) == [.int(1)] && store.postsInFeedOrder(-2..<1).map(\.id) == [.string("z")])
        #expect(store.postsInFeedOrder(5..<9).isEmpty)
        #expect(store.postsInFeedOrder(0..<2).map(\.json) == Self.posts([.string("z"), .int(2)]).map(\.json))
        #expect(store.postsAtFeedEnds(of: 3).map(\.id) == [.string("z"), .string("a")])
        #expect(store.postsAtFeedEnds(of: 10).map(\.id) == [.string("z"), .int(1)], "more asked than stored: the last stored")
        #expect(store.postsAtFeedEnds(of: 1).isEmpty && store.postsAtFeedEnds(of: 0).isEmpty)
    }

    @Test func withAnyStringIdTheListIsTheFeedOrder() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let feed: [PostID] = [.string("z"), .int(2), .string("a"), .int(1)]
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts(feed), pages: Self.twoPages + [FeedPage(url: "w", count: 1)])
        store.close()
        try Self.throughReopenAndCompaction(dir) { s in
            #expect(s.posts(offset: 0, limit: 9).page.map(\.json) == Self.posts(feed).map(\.json))
            #expect(s.posts(offset: 3, limit: 9).total == 4 && s.posts(offset: 3, limit: 9).page.map(\.json) == Self.posts([.int(1)]).map(\.json))
            #expect(s.postsInFeedOrder().map(\.id) == feed)
            #expect(s.postPages == Self.twoPages + [FeedPage(url: "w", count: 1)])
        }
    }

    /// The order follows each refresh: posts move, new ones land where the
    /// feed has them, removed ones leave.
    @Test func theFeedOrderIsTheLastRefreshs() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts(Self.posts([.string("a"), .string("b"), .string("c")]), pages: onePage(count: 3))
        let change = try store.replacePosts(Self.posts([.string("d"), .string("c"), .string("a")]), pages: onePage(count: 3))
        #expect(change == PostsChange(fetched: 1, unchanged: 2, removed: 1))
        #expect(store.postsInFeedOrder().map(\.id) == [.string("d"), .string("c"), .string("a")])
        #expect(store.posts(offset: 0, limit: 9).page.map(\.json) == Self.posts([.string("d"), .string("c"), .string("a")]).map(\.json))
    }

    /// Nothing changed: not one byte is written, for the posts or the manifest.
    @Test func aRefreshThatChangesNothingWritesNothing() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let feed: [PostID] = [.string("x"), .int(4), .int(2)]
        _ = try store.replacePosts(Self.posts(feed), pages: Self.twoPages)
        try store.replaceManifest([("a.png", nil), ("b.png", "B")], pages: [FeedPage(url: "m", next: "m2", count: 1), FeedPage(url: "m2", count: 1)])
        let length = try Self.logLength(dir)
        let change = try store.replacePosts(Self.posts(feed), pages: Self.twoPages)
        #expect(change == PostsChange(fetched: 0, unchanged: 3, removed: 0))
        #expect(try store.replaceManifest([("a.png", nil), ("b.png", "B")], pages: [FeedPage(url: "m", next: "m2", count: 1), FeedPage(url: "m2", count: 1)]) == 0)
        // Unsafe validators are dropped before the comparison, as before the first write.
        var unsafe = Self.twoPages
        unsafe[1].validators.etag = "\"e\"\r\n"
        _ = try store.replacePosts(Self.posts(feed), pages: unsafe)
        #expect(try Self.logLength(dir) == length)
    }

    /// A change of a page alone (its validators, its next page) is a change:
    /// it is written, and read back after a reopen.
    @Test func aChangeOfOnlyAPageIsWritten() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        let feed: [PostID] = [.int(1), .int(2), .int(3)]
        _ = try store.replacePosts(Self.posts(feed), pages: Self.twoPages)
        var length = try Self.logLength(dir)
        var pages = Self.twoPages
        pages[1].validators = Validators(etag: Validators.ignoredETag, lastModified: "Wed, 02 Dec 2026 06:00:00 GMT")
        #expect(try store.replacePosts(Self.posts(feed), pages: pages) == PostsChange(fetched: 0, unchanged: 3, removed: 0))
        #expect(try Self.logLength(dir) > length)
        length = try Self.logLength(dir)
        pages[1].next = "https://o.test/p?3"
        _ = try store.replacePosts(Self.posts(feed), pages: pages)
        #expect(try Self.logLength(dir) > length)
        try store.replaceManifest([("a.png", nil)], pages: [FeedPage(url: "m", count: 1)])
        length = try Self.logLength(dir)
        try store.replaceManifest([("a.png", nil)], pages: [FeedPage(url: "m", validators: Validators(etag: "\"m\""), count: 1)])
        #expect(try Self.logLength(dir) > length)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postPages == pages && store.postPages[1].validators.etagIgnored)
        #expect(store.manifestPages == [FeedPage(url: "m", validators: Validators(etag: "\"m\""), count: 1)])
    }

    /// What breaks the rules is refused, naming it, and nothing is written.
    @Test func invalidPostsOrPagesAreRefusedBeforeAnythingIsWritten() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let three = Self.posts([.int(1), .int(2), .int(3)])
        let cases: [(posts: [(id: PostID, json: [UInt8])], pages: [FeedPage], says: String)] = [
            (three, [FeedPage(url: "u", count: 2)], "the counts of the posts feed's 1 pages add up to 2, but 3 items were given"),
            (three, [], "the posts feed was given no pages (it has 3 items)"),
            (three, [FeedPage(url: "u", count: 4), FeedPage(url: "v", count: -1)], "page 1 of the posts feed has a count of -1"),
            ([(.string(""), [])], onePage(count: 1), "a post id of 0 bytes (1 to 1024 are allowed)"),
            ([(.string(String(repeating: "x", count: 1025)), [])], onePage(count: 1), "a post id of 1025 bytes (1 to 1024 are allowed)"),
        ]
        for c in cases {
            do {
                _ = try store.replacePosts(c.posts, pages: c.pages)
                Issue.record("stored \(c.says)")
            } catch {
                #expect("\(error)" == "refused to store the feed: \(c.says); nothing was written")
            }
        }
        #expect(throws: StoreError.self) { try store.replaceManifest([("a", nil)], pages: onePage(count: 2)) }
        #expect(try FileSystem.read(dir.path + "/index.log") == RecordCodec.header(version: 1))
        #expect(try FileSystem.list(dir.path + "/posts").isEmpty)
    }

    /// A feed of 50,000 string ids (UUID-like, as real feeds have): stored,
    /// an identical refresh writes no byte, and a reopen gives the same order.
    @Test func fiftyThousandStringIdsRefreshAndReopen() throws {
        // In memory where there is a tmpfs: 50,000 fsyncs of post files
        // cost half a minute on a disk and this test is about the log.
        let dir = TempDir(base: "/dev/shm"); defer { dir.cleanup() }
        var rng = SystemRandomNumberGenerator()
        func hex(_ n: Int) -> String { String((0..<n).map { _ in "0123456789abcdef".randomElement(using: &rng)! }) }
        let ids = (0..<50_000).map { _ in PostID.string("\(hex(8))-\(hex(4))-\(hex(4))-\(hex(4))-\(hex(12))") }
        let posts = Self.posts(ids)
        let pages = (0..<50).map { FeedPage(url: "https://o.test/p?page=\($0)", next: $0 < 49 ? "https://o.test/p?page=\($0 + 1)" : nil, count: 1000) }
        var store = try Store(StoreConfiguration(directory: dir.path))
        #expect(try store.replacePosts(posts, pages: pages).fetched == 50_000)
        let length = try Self.logLength(dir)
        #expect(try store.replacePosts(posts, pages: pages) == PostsChange(fetched: 0, unchanged: 50_000, removed: 0))
        #expect(try Self.logLength(dir) == length, "an identical refresh writes nothing")
        #expect(try FileSystem.list(dir.path + "/posts").count == 50_000)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postsInFeedOrder().map(\.id) == ids)
        #expect(store.posts(offset: 49_998, limit: 5).page.map(\.json) == posts.suffix(2).map(\.json))
        #expect(store.postPages == pages)
        #expect(store.reconcilePostFiles().fixed == 0)
    }

    /// Damage in the new records is cut as any damage: the committed prefix stays.
    @Test func aTornPageRecordIsCutAndThePrefixKept() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts([.string("a"), .int(1)]), pages: Self.twoPages.map { var p = $0; p.count = 1; return p })
        store.close()
        let good = try FileSystem.read(dir.path + "/index.log")
        let torn = RecordCodec.encode(.postOrder(start: 0, ids: [.int(1)])) + RecordCodec.encode(.page(feed: .posts, index: 0, page: FeedPage(url: "x", count: 2)))
        try FormatEvolutionTests.append(Array(torn.dropLast(2)), to: dir.path + "/index.log")
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.recovery != nil)
        #expect(try FileSystem.read(dir.path + "/index.log") == good)
        #expect(store.postsInFeedOrder().map(\.id) == [.string("a"), .int(1)] && store.postPages.count == 2)
    }
}
