import Testing
import Foundation
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem
import TestSupport

/// `posts-keep` and `delete_post` (docs/protocol.md, "History") through the
/// service, a real origin and a real store: a window that slides as a blog's
/// feed does, the newest N, the walk that stops at a page of nothing new,
/// a restart, and removing one post by hand.
@Suite(.serialized) struct FeedHistoryTests {
    static let shape = FeedShape(prefix: "posts", items: .member("items"), next: .member("next"))

    /// A page of the window: newest first, string ids as feeds give them.
    static func page(_ ids: ClosedRange<Int>, next: String? = nil) -> String {
        let items = ids.reversed().map { #"{"id":"p\#($0)","title":"post \#($0)"}"# }.joined(separator: ",")
        return #"{"items":[\#(items)],"next":\#(next.map { "\"\($0)\"" } ?? "null")}"#
    }

    static func ids(_ s: CacheService) -> [String] {
        s.posts(offset: 0, limit: nil).ids.map { $0.description }
    }

    static func run(_ keep: PostsKeep, _ body: (ServiceOrigin, String, (FeedConfiguration) throws -> Harness) async throws -> Void) async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("history")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await body(origin, dir) { feeds in
            var f = feeds
            f.postsKeep = keep
            return try Harness(origin: nil, feeds: f, storeDirectory: dir + "/store", directory: dir)
        }
    }

    @Test func keepAllKeepsEveryPostASlidingWindowEverListedAcrossARestart() async throws {
        try await Self.run(.all) { origin, _, harness in
            let feeds = FeedConfiguration(postsURL: origin.url("/etag/w.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: Self.shape)
            var h = try harness(feeds)
            for n in 3...8 {
                try PagedRefreshTests.write(origin, "w.json", Self.page(n - 2...n))
                let r = try await PagedRefreshTests.prefetch(h.service).get()
                #expect(r.posts?.kept == n - 3, "after \(n): \(String(describing: r.posts))")
                // Each post counted once: the feed's 3 are fetched or unchanged, the others kept.
                #expect((r.posts?.fetched ?? 0) + (r.posts?.unchanged ?? 0) == 3, "after \(n): \(String(describing: r.posts))")
                #expect(r.posts?.removed == 0)
            }
            #expect(Self.ids(h.service) == ["p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1"])
            h.shutdownService()
            h = try harness(feeds)
            defer { h.shutdownService() }
            #expect(Self.ids(h.service) == ["p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1"])
            // Unchanged: one 304, nothing written, nothing lost.
            let r = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(r.posts?.fetched == 0 && r.posts?.removed == 0)
            #expect(r.posts?.unchanged == 3 && r.posts?.kept == 5, "\(String(describing: r.posts))")
            #expect(Self.ids(h.service).count == 8)
        }
    }

    @Test func keepNewestNKeepsTheFeedsOwnFirstThenTheMostRecentKept() async throws {
        try await Self.run(.newest(5)) { origin, _, harness in
            let feeds = FeedConfiguration(postsURL: origin.url("/etag/w.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: Self.shape)
            let h = try harness(feeds)
            defer { h.shutdownService() }
            for n in 3...8 {
                try PagedRefreshTests.write(origin, "w.json", Self.page(n - 2...n))
                _ = try await PagedRefreshTests.prefetch(h.service).get()
            }
            #expect(Self.ids(h.service) == ["p8", "p7", "p6", "p5", "p4"])
            // A feed longer than N keeps its own first N.
            try PagedRefreshTests.write(origin, "w.json", Self.page(1...9))
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(Self.ids(h.service) == ["p9", "p8", "p7", "p6", "p5"])
        }
    }

    @Test func aHistoryRefreshStopsAtTheFirstPageOfNothingNew() async throws {
        try await Self.run(.all) { origin, _, harness in
            let feeds = FeedConfiguration(postsURL: origin.url("/etag/a.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: Self.shape)
            let h = try harness(feeds)
            defer { h.shutdownService() }
            try PagedRefreshTests.write(origin, "a.json", Self.page(5...6, next: "b.json"))
            try PagedRefreshTests.write(origin, "b.json", Self.page(3...4, next: "c.json"))
            try PagedRefreshTests.write(origin, "c.json", Self.page(1...2))
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(Self.ids(h.service) == ["p6", "p5", "p4", "p3", "p2", "p1"])
            let before = try origin.requests().count
            // A new post on top: page 1 changes, page 2 holds nothing new, page 3 is never asked.
            try PagedRefreshTests.write(origin, "a.json", Self.page(6...7, next: "b.json"))
            try PagedRefreshTests.write(origin, "b.json", Self.page(4...5, next: "c.json"))
            try PagedRefreshTests.write(origin, "c.json", Self.page(2...3))
            let r = try await PagedRefreshTests.prefetch(h.service).get()
            let asked = try origin.requests().dropFirst(before).map(\.path)
            #expect(asked == ["/etag/a.json", "/etag/b.json"], "\(asked)")
            #expect(r.posts?.removed == 0)
            #expect(Self.ids(h.service) == ["p7", "p6", "p5", "p4", "p3", "p2", "p1"])
        }
    }

    @Test func deletePostRemovesAKeptPostAndOneTheFeedListsUntilItsPageChanges() async throws {
        try await Self.run(.all) { origin, _, harness in
            let feeds = FeedConfiguration(postsURL: origin.url("/etag/w.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: Self.shape)
            let h = try harness(feeds)
            defer { h.shutdownService() }
            for n in 3...5 {
                try PagedRefreshTests.write(origin, "w.json", Self.page(n - 2...n))
                _ = try await PagedRefreshTests.prefetch(h.service).get()
            }
            #expect(Self.ids(h.service) == ["p5", "p4", "p3", "p2", "p1"])
            let kept = try await completion { h.service.deletePost(id: .string("p1"), then: $0) }.get()
            #expect(kept == .string("p1"))
            let listed = try await completion { h.service.deletePost(id: .string("p4"), then: $0) }.get()
            #expect(listed == .string("p4"))
            #expect(Self.ids(h.service) == ["p5", "p3", "p2"])
            let again = await completion { h.service.deletePost(id: .string("p1"), then: $0) }
            guard case .failure(.notFound) = again else { Issue.record("a second delete: \(again)"); return }
            // The page that lists p4 answers 304: it stays deleted, and p1 never comes back.
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(Self.ids(h.service) == ["p5", "p3", "p2"])
            // The page changes: the feed lists p4 again, so it is back.
            try PagedRefreshTests.write(origin, "w.json", Self.page(4...6))
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(Self.ids(h.service) == ["p6", "p5", "p4", "p3", "p2"])
        }
    }

    @Test func historyAndTrimArePure() {
        func posts(_ ids: [String]) -> [(id: PostID, json: [UInt8])] { ids.map { (.string($0), Array("{}".utf8)) } }
        let stored = posts(["c", "b", "a"])
        #expect(FeedRefresher.history(.feed, listed: 1, stored: stored, storedListed: 3, seen: [.string("d")]).isEmpty)
        #expect(FeedRefresher.history(.all, listed: 2, stored: stored, storedListed: 3, seen: [.string("d"), .string("b")]).map(\.id) == [.string("c"), .string("a")])
        #expect(FeedRefresher.history(.newest(3), listed: 2, stored: stored, storedListed: 1, seen: [.string("d"), .string("e")]).map(\.id) == [.string("c")])
        #expect(FeedRefresher.history(.newest(2), listed: 2, stored: stored, storedListed: 3, seen: []).isEmpty)
        // By date where the posts have one: a feed that listed an older post
        // first (a "hot" order) leaves it in the history where its date puts it.
        func dated(_ id: String, _ date: String?) -> (id: PostID, json: [UInt8]) {
            (.string(id), Array((date.map { #"{"date_published":"\#($0)"}"# } ?? "{}").utf8))
        }
        let listedBefore = [dated("x", "2024-03-01T00:00:00Z"), dated("old", "2023-01-01T00:00:00+01:00"), dated("new", "2024-05-01T12:00:00-02:00")]
        let kept = [dated("k1", "2024-04-01T00:00:00Z"), dated("k2", "2024-02-01T00:00:00Z"), dated("k3", nil)]
        let h = FeedRefresher.history(.all, listed: 1, stored: listedBefore + kept, storedListed: 3, seen: [.string("x")])
        #expect(h.map(\.id.description) == ["new", "k1", "k2", "old", "k3"])
        var pages = [FeedPage(url: "1", count: 2), FeedPage(url: "2", count: 2)]
        var list = posts(["a", "b", "c", "d"])
        FeedRefresher.trim(&pages, &list, to: .newest(3))
        #expect(list.map(\.id) == [.string("a"), .string("b"), .string("c")])
        #expect(pages.map(\.count) == [2, 1])
    }

    /// `posts-keep N` on a feed that lists oldest first keeps the newest N:
    /// its own last N (the first pages shrink), and of the posts it stopped
    /// listing the last it listed (the newcomer's 4...28 kept 1 and 2, not 3).
    @Test func anOldestFirstFeedKeepsItsNewestPosts() {
        func posts(_ ids: [Int]) -> [(id: PostID, json: [UInt8])] { ids.map { (.int(Int64($0)), Array("{}".utf8)) } }
        let h = FeedRefresher.history(.newest(27), listed: 25, stored: posts(Array(1...25)), storedListed: 25,
                                      seen: Set((4...28).map { PostID.int(Int64($0)) }), oldestFirst: true)
        #expect(h.map(\.id) == [.int(3), .int(2)])
        var pages = [FeedPage(url: "1", count: 10), FeedPage(url: "2", count: 10), FeedPage(url: "3", count: 10)]
        var list = posts(Array(1...30))
        FeedRefresher.trim(&pages, &list, to: .newest(27), oldestFirst: true, history: 0)
        #expect(list.map(\.id) == (4...30).map { .int(Int64($0)) })
        #expect(pages.map(\.count) == [7, 10, 10])
        var withHistory = posts(Array(1...5) + [90, 91])
        var two = [FeedPage(url: "1", count: 5)]
        FeedRefresher.trim(&two, &withHistory, to: .newest(3), oldestFirst: true, history: 2)
        #expect(withHistory.map(\.id) == [.int(3), .int(4), .int(5)] && two.map(\.count) == [3])
    }
}

extension FeedHistoryTests {
    /// An oldest-first feed (json-server, Contentful's default order) gets its
    /// new posts on its last page: a history refresh reads every page.
    @Test func anOldestFirstHistoryFeedIsReadToItsLastPage() async throws {
        try await Self.run(.all) { origin, _, harness in
            let feeds = FeedConfiguration(postsURL: origin.url("/etag/a.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20, postsShape: Self.shape)
            let h = try harness(feeds)
            defer { h.shutdownService() }
            func page(_ ids: ClosedRange<Int>, next: String?) -> String {
                #"{"items":[\#(ids.map { #"{"id":\#($0)}"# }.joined(separator: ","))],"next":\#(next.map { "\"\($0)\"" } ?? "null")}"#
            }
            try PagedRefreshTests.write(origin, "a.json", page(1...2, next: "b.json"))
            try PagedRefreshTests.write(origin, "b.json", page(3...3, next: nil))
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            try PagedRefreshTests.write(origin, "b.json", page(3...4, next: nil))
            let r = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(r.posts?.fetched == 1)
            #expect(Self.ids(h.service) == ["1", "2", "3", "4"])
        }
        #expect(FeedRefresher.listsOldestFirst([(.string("109"), []), (.string("110"), [])]))
        #expect(!FeedRefresher.listsOldestFirst([(.string("p2"), Array(#"{"date_published":"2024-02-01T00:00:00Z"}"#.utf8)),
                                               (.string("p1"), Array(#"{"date_published":"2024-01-01T00:00:00Z"}"#.utf8))]))
    }
}

/// `feeds.state` (docs/storage-format.md, "The feeds' state"): pages stored
/// under other settings are asked again without validators, at a reload as
/// after a restart, and a "has more" warning stands across a restart.
@Suite(.serialized) struct FeedSettingsChangeTests {
    @Test func newPagingSettingsReachThePagesAReloadOrARestartLeftAnswering304() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("settings")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PagedRefreshTests.write(origin, "r.json", #"{"items":[{"id":"a"},{"id":"b"}],"next":"r2.json"}"#)
        try PagedRefreshTests.write(origin, "r2.json", #"{"items":[{"id":"c"}],"next":null}"#)
        var feeds = FeedConfiguration(postsURL: origin.url("/etag/r.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: FeedShape(prefix: "posts", items: .member("items")))
        var h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        var r = try await PagedRefreshTests.prefetch(h.service).get()
        #expect(r.warnings == [#"posts page 1 has more: /next = "r2.json"; set posts-next = /next"#])
        // A restart: the page answers 304 and the warning still stands.
        h.shutdownService()
        h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        r = try await PagedRefreshTests.prefetch(h.service).get()
        #expect(r.posts?.fetched == 0 && r.warnings.count == 1, "\(r.warnings)")
        #expect(h.service.status().feedWarnings == r.warnings)
        // New settings, as a restart on an edited configuration brings them:
        // page 1 is asked without validators and its next page followed.
        h.shutdownService()
        feeds.postsShape.next = .member("next")
        h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        #expect(h.service.status().feedWarnings.isEmpty, "the warning asked for the settings now set")
        var before = try origin.requests().count
        r = try await PagedRefreshTests.prefetch(h.service).get()
        var asked = Array(try origin.requests().dropFirst(before))
        #expect(asked.map(\.path) == ["/etag/r.json", "/etag/r2.json"])
        #expect(asked.first?.ifNoneMatch == nil, "page 1 was asked without validators")
        #expect(r.warnings.isEmpty && h.service.status().feedWarnings.isEmpty)
        #expect(FeedHistoryTests.ids(h.service) == ["a", "b", "c"])
        // The same settings again: both pages 304.
        before = try origin.requests().count
        r = try await PagedRefreshTests.prefetch(h.service).get()
        asked = Array(try origin.requests().dropFirst(before))
        #expect(asked.map(\.status) == [304, 304])
        // A reload back (SIGHUP): asked again without validators, page 1 alone, and warned again.
        feeds.postsShape.next = nil
        h.service.apply(feeds)
        before = try origin.requests().count
        r = try await PagedRefreshTests.prefetch(h.service).get()
        asked = Array(try origin.requests().dropFirst(before))
        #expect(asked.map(\.status) == [200])
        #expect(r.warnings.count == 1)
        h.shutdownService()
    }

    /// A history feed whose settings change walks every page: the pages
    /// after its first may never have been read (a next link just set).
    @Test func aHistoryFeedWithNewSettingsIsWalkedPastItsFirstPage() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("settings")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PagedRefreshTests.write(origin, "k.json", #"{"items":[{"id":"b"},{"id":"a"}],"next":"k2.json"}"#)
        try PagedRefreshTests.write(origin, "k2.json", #"{"items":[{"id":"c"}],"next":null}"#)
        var feeds = FeedConfiguration(postsURL: origin.url("/etag/k.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: FeedShape(prefix: "posts", items: .member("items")))
        feeds.postsKeep = .all
        let h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        defer { h.shutdownService() }
        _ = try await PagedRefreshTests.prefetch(h.service).get()
        #expect(FeedHistoryTests.ids(h.service) == ["b", "a"])
        feeds.postsShape.next = .member("next")
        h.service.apply(feeds)
        let r = try await PagedRefreshTests.prefetch(h.service).get()
        #expect(FeedHistoryTests.ids(h.service) == ["b", "a", "c"], "page 1 held nothing new, page 2 was never read")
        #expect(r.warnings.isEmpty)
    }

    /// posts-keep is part of the settings: going back to `feed` drops the
    /// history even while every page answers 304.
    @Test func goingBackToKeepFeedDropsTheHistory() async throws {
        try await FeedHistoryTests.run(.all) { origin, dir, harness in
            var feeds = FeedConfiguration(postsURL: origin.url("/etag/w.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                          postsShape: FeedHistoryTests.shape)
            feeds.postsKeep = .all
            let h = try harness(feeds)
            defer { h.shutdownService() }
            for n in 3...5 {
                try PagedRefreshTests.write(origin, "w.json", FeedHistoryTests.page(n - 2...n))
                _ = try await PagedRefreshTests.prefetch(h.service).get()
            }
            #expect(FeedHistoryTests.ids(h.service).count == 5)
            feeds.postsKeep = .feed
            h.service.apply(feeds)
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(FeedHistoryTests.ids(h.service) == ["p5", "p4", "p3"])
        }
    }

    /// A store without feeds.state (one from before it, or one whose file
    /// was damaged: taken as absent) has pages walked under settings not
    /// recorded: the first refresh asks them without validators, once.
    @Test func aStoreWithoutFeedsStateAsksItsPagesAgainOnce() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("settings")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PagedRefreshTests.write(origin, "u.json", #"{"items":[{"id":"a"}],"next":null}"#)
        let feeds = FeedConfiguration(postsURL: origin.url("/etag/u.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: FeedShape(prefix: "posts", items: .member("items"), next: .member("next")))
        var h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        _ = try await PagedRefreshTests.prefetch(h.service).get()
        h.shutdownService()
        for damage in ["gone", "edited"] {
            if damage == "gone" { try FileManager.default.removeItem(atPath: dir + "/store/feeds.state") }
            else { try Data("cached feeds state 1\nposts 00\n".utf8).write(to: URL(fileURLWithPath: dir + "/store/feeds.state")) }
            h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
            var before = try origin.requests().count
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(try origin.requests().dropFirst(before).map(\.status) == [200], "\(damage): asked without validators")
            before = try origin.requests().count
            _ = try await PagedRefreshTests.prefetch(h.service).get()
            #expect(try origin.requests().dropFirst(before).map(\.status) == [304], "\(damage): once")
            #expect(FeedHistoryTests.ids(h.service) == ["a"])
            h.shutdownService()
        }
    }
}
