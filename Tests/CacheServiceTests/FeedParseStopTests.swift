import Testing
@testable import CacheService
import CacheProtocol
import CacheSystem

/// A feed page's parse answers to the daemon's stop flag (`StopFlag.current`,
/// bound by the refresh to the store's): a large page gives up within a few
/// thousand items once the daemon stops, rather than holding the shutdown
/// for the seconds a page of a gigabyte takes (docs/architecture.md,
/// "Background passes").
@Suite struct FeedParseStopTests {
    static let count = 3 * StopFlag.itemsBetweenLooks

    static var jsonPosts: [UInt8] {
        Array(("[" + (1...count).map { "{\"id\":\($0),\"title\":\"post \($0)\"}" }.joined(separator: ",") + "]").utf8)
    }

    static var rss: [UInt8] {
        let items = (1...count).map { "<item><guid>urn:post:\($0)</guid><title>post \($0)</title></item>" }.joined()
        return Array("<?xml version=\"1.0\"?><rss version=\"2.0\"><channel><title>t</title>\(items)</channel></rss>".utf8)
    }

    static var manifest: [UInt8] {
        Array(("[" + (1...count).map { "{\"url\":\"https://example.com/\($0).png\"}" }.joined(separator: ",") + "]").utf8)
    }

    static func raised() -> StopFlag {
        let flag = StopFlag()
        flag.raise()
        return flag
    }

    /// The decode under `flag`, its error if any.
    static func posts(_ body: [UInt8], type: String, under flag: StopFlag) -> Result<DecodedPostsPage, FeedError> {
        StopFlag.$current.withValue(flag) {
            Result { () throws(FeedError) in try FeedDecoder.postsPage(body, shape: FeedShape(prefix: "posts"), id: .member("id"), contentType: type) }
        }
    }

    @Test(arguments: [("application/json", true), ("application/rss+xml", false)])
    func aPostsPageGivesUpOnceTheFlagIsRaised(type: String, json: Bool) throws {
        let body = json ? Self.jsonPosts : Self.rss
        let whole = try Self.posts(body, type: type, under: StopFlag()).get()
        #expect(whole.posts.count == Self.count, "read whole while the flag is down")
        #expect(Self.posts(body, type: type, under: Self.raised()).map(\.posts.count) == .failure(FeedError.stopping))
    }

    /// An RSS page's items written out as JSON (each up to a post's 64
    /// MiB) look at the flag every few items, not every few thousand: a
    /// page of 20 items, far fewer nodes than the parse's looks are apart.
    @Test func anRSSPagesItemsWrittenOutGiveUpOnceTheFlagIsRaised() throws {
        let items = (1...FeedError.postsBetweenLooks + 4).map { "<item><guid>urn:\($0)</guid></item>" }.joined()
        let body = Array("<rss version=\"2.0\"><channel>\(items)</channel></rss>".utf8)
        #expect(try Self.posts(body, type: "application/rss+xml", under: StopFlag()).get().posts.count == FeedError.postsBetweenLooks + 4)
        #expect(Self.posts(body, type: "application/rss+xml", under: Self.raised()).map(\.posts.count) == .failure(FeedError.stopping))
    }

    /// A page of a few large items is looked at by its bytes
    /// (`StopFlag.bytesBetweenLooks`), not only every few thousand items:
    /// three JSON posts, or two RSS items, of 9 MB each.
    @Test(arguments: [true, false]) func aPageOfFewLargeItemsGivesUpByItsBytes(json: Bool) throws {
        let long = String(repeating: "x", count: 9_000_000)
        let body = json ? Array(("[" + (1...3).map { "{\"id\":\($0),\"body\":\"\(long)\"}" }.joined(separator: ",") + "]").utf8)
            : Array(("<rss version=\"2.0\"><channel>" + (1...2).map { "<item><guid>urn:\($0)</guid><description>\(long)</description></item>" }.joined()
                     + "</channel></rss>").utf8)
        let type = json ? "application/json" : "application/rss+xml"
        #expect(try Self.posts(body, type: type, under: StopFlag()).get().posts.count == (json ? 3 : 2))
        #expect(Self.posts(body, type: type, under: Self.raised()).map(\.posts.count) == .failure(FeedError.stopping))
    }

    /// A page whose items' array is small beside large other values (a
    /// `posts-items` naming the wrong array of a large document, or a
    /// document that carries much else) is looked at by its bytes too,
    /// inside those values: three strings of 9 MB in a sibling member,
    /// before the items and after them, and nested two levels down.
    @Test(arguments: [true, false]) func aPageOfLargeValuesBesideItsItemsGivesUpByItsBytes(before: Bool) throws {
        let long = "\"" + String(repeating: "x", count: 9_000_000) + "\""
        let other = "\"other\":{\"deep\":[" + [long, long, long].joined(separator: ",") + "]}"
        let items = "\"posts\":[{\"id\":1},{\"id\":2}]"
        let body = Array(("{" + (before ? other + "," + items : items + "," + other) + "}").utf8)
        let shape = FeedShape(prefix: "posts", items: try JSONPointer("/posts"))
        let decode = { (flag: StopFlag) in
            StopFlag.$current.withValue(flag) {
                Result { () throws(FeedError) in try FeedDecoder.postsPage(body, shape: shape, id: .member("id"), contentType: "application/json") }
            }
        }
        #expect(try decode(StopFlag()).get().posts.count == 2)
        #expect(decode(Self.raised()).map(\.posts.count) == .failure(FeedError.stopping))
    }

    @Test func aManifestPageGivesUpOnceTheFlagIsRaised() throws {
        let decode = { (flag: StopFlag) in
            StopFlag.$current.withValue(flag) {
                Result { () throws(FeedError) in
                    try FeedDecoder.manifestPage(Self.manifest, shape: FeedShape(prefix: "images"), fields: ItemFields(), contentType: "application/json")
                }
            }
        }
        #expect(try decode(StopFlag()).get().entries.count == Self.count)
        #expect(decode(Self.raised()).map(\.entries.count) == .failure(FeedError.stopping))
    }

    /// The manifest's entries, read from their elements after the parse
    /// (`Document.forEachItem`), look at the flag too: the daemon may stop
    /// between the parse and them.
    @Test func aManifestsEntriesReadAfterTheParseGiveUpOnceTheFlagIsRaised() throws {
        let doc = try FeedDecoder.document(Self.manifest, shape: FeedShape(prefix: "images"), contentType: "application/json")
        var read = 0
        try doc.forEachItem(in: Self.manifest) { _, _ in read += 1 }
        #expect(read == Self.count)
        read = 0
        let stopped = StopFlag.$current.withValue(Self.raised()) {
            Result { () throws(FeedError) in try doc.forEachItem(in: Self.manifest) { _, _ in read += 1 } }
        }
        #expect(stopped.map { read } == .failure(FeedError.stopping))
        #expect(read == StopFlag.itemsBetweenLooks - 1, "stopped at its first look")
    }

    /// Through the service: a refresh whose store is stopping fails saying
    /// so, and stores nothing; a page under a few thousand items is read whole.
    @Test func aRefreshOfALargePageFailsOnceTheStoreIsStopping() async throws {
        let h = try await Harness.start(extra: ["large.json": Self.jsonPosts], feeds: { origin in
            Harness.feeds(origin, posts: "/large.json", images: nil)
        })
        defer { h.close() }
        let s = h.service
        s.store.stopPasses()
        let result = await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }
        guard case .failure(let error) = result else {
            Issue.record("a refresh read a page of \(Self.count) items while the daemon was stopping: \(result)")
            return
        }
        #expect("\(error)".contains(FeedError.stopping.description), "\(error)")
        guard case .store(.stopped, _) = error else { Issue.record("reported as \(error), not as the daemon's stop"); return }
        #expect(s.status().counters.upstreamErrors == 0, "not counted as the origin's failure")
        #expect(s.status().posts == 0, "nothing stored")
    }
}
