import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem
import CacheProtocol
import TestSupport

/// Paged refreshes at their edges: pages that answered 304 put back after a
/// compaction and a restart, a slow walk shared by both feeds, a huge
/// max-object-size (docs/protocol.md, "Feeds").
@Suite(.serialized) struct PagedRefreshTests {
    static let shape = FeedShape(prefix: "posts", items: .member("data"), next: .member("next"))

    static func write(_ origin: ServiceOrigin, _ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: origin.root + "/" + name))
    }

    static func prefetch(_ s: CacheService, _ scope: PrefetchTarget = .posts) async -> Result<PrefetchReport, CacheError> {
        await completion { s.prefetch(scope, force: false, progress: { _ in }, then: $0) }
    }

    /// Page 2 answers 304 after a compaction and a restart: its posts are
    /// the ones it gave, so no post still upstream is removed.
    @Test func aPageThatAnswers304AfterACompactionAndARestartKeepsItsPosts() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("paged")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let feeds = FeedConfiguration(postsURL: origin.url("/etag/p1.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: Self.shape)
        try Self.write(origin, "p1.json", #"{"data":[{"id":"c"}],"next":"p2.json"}"#)
        try Self.write(origin, "p2.json", #"{"data":[{"id":"a"},{"id":"b"}],"next":null}"#)
        var h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        _ = try await Self.prefetch(h.service).get()
        try Self.write(origin, "p1.json", #"{"data":[],"next":"p2.json"}"#)
        _ = try await Self.prefetch(h.service).get()
        _ = try await completion { h.service.compact(then: $0) }.get()
        try Self.write(origin, "p1.json", #"{"data":[{"id":"c"}],"next":"p2.json"}"#)
        _ = try await Self.prefetch(h.service).get()
        h.shutdownService()
        h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        defer { h.shutdownService() }
        #expect(h.service.posts(offset: 0, limit: nil).ids == [.string("c"), .string("a"), .string("b")])
        try Self.write(origin, "p1.json", #"{"data":[{"id":"c","v":2}],"next":"p2.json"}"#)
        let r = try await Self.prefetch(h.service).get()
        #expect(r.posts?.removed == 0, "\(String(describing: r.posts))")
        #expect(h.service.posts(offset: 0, limit: nil).ids == [.string("c"), .string("a"), .string("b")])
    }

    /// With images-url = posts-url, a slow walk for `prefetch all` must not
    /// store its manifest over a newer one an images prefetch stored meanwhile.
    @Test func aSlowSharedWalkNeverStoresAnOlderManifest() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("paged")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let url = origin.url("/etag/p1.json")
        let feeds = FeedConfiguration(postsURL: url, imagesURL: url, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: Self.shape, imagesShape: FeedShape(prefix: "images", items: .member("data"), next: .member("next")))
        try Self.write(origin, "p1.json", #"{"data":[{"id":"a","url":"old.png"}],"next":"/fault/hang/3/p2.json"}"#)
        try Self.write(origin, "p2.json", #"{"data":[{"id":"b","url":"b.png"}],"next":null}"#)
        let h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        defer { h.shutdownService() }
        let s = h.service
        let all = Task { await Self.prefetch(s, .all) }
        try await Task.sleep(for: .milliseconds(800))
        try Self.write(origin, "p1.json", #"{"data":[{"id":"a","url":"new.png"}],"next":null}"#)
        _ = await Self.prefetch(s, .images)
        #expect(s.store.rows(offset: 0, limit: 9).page.map(\.url) == ["new.png"])
        _ = await all.value
        #expect(s.store.rows(offset: 0, limit: 9).page.map(\.url) == ["new.png"], "the walk that began first stored nothing older")
    }

    /// The bound on all pages together saturates: a feed-max-size near
    /// Int.max walks pages instead of trapping.
    @Test func aHugeMaxObjectSizeDoesNotOverflowTheBoundOnAllPages() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("paged")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var feeds = FeedConfiguration(postsURL: origin.url("/etag/p1.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: Self.shape)
        feeds.feedMaxSize = 1 << 60
        try Self.write(origin, "p1.json", #"{"data":[{"id":"c"}],"next":"p2.json"}"#)
        try Self.write(origin, "p2.json", #"{"data":[{"id":"a"}],"next":null}"#)
        let h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        defer { h.shutdownService() }
        #expect(try await Self.prefetch(h.service).get().posts?.fetched == 2)
    }
}
