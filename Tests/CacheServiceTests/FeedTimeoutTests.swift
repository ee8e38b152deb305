import Testing
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem
import TestSupport

/// feed-timeout through the service and a real origin (issue 33's dripping
/// pages): each page comes within the transfer's timeout, the walk does
/// not; it fails naming the page it reached, a prefetch that joined it
/// gets the same answer, and nothing of the feed changes.
@Suite(.serialized) struct FeedTimeoutTests {
    @Test func aDrippingFeedFailsAtFeedTimeoutAndAJoinerHearsTheSame() async throws {
        let origin = try await ServiceOrigin.start()
        defer { origin.stop() }
        let dir = try makeTempDirectory("timeout")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Ten pages, each sent 16 bytes every 50 ms (about 0.3 s a page).
        for n in 1...10 {
            let next = n < 10 ? "\"/fault/drip/50/16/d\(n + 1).json\"" : "null"
            try PagedRefreshTests.write(origin, "d\(n).json", #"{"items":[{"id":\#(n),"title":"page \#(n) of ten"}],"next":\#(next)}"#)
        }
        var feeds = FeedConfiguration(postsURL: origin.url("/fault/drip/50/16/d1.json"), imagesURL: nil, imagesBaseURL: nil, maxObjectSize: 1 << 20,
                                      postsShape: FeedShape(prefix: "posts", items: .member("items"), next: .member("next")))
        feeds.feedTimeout = .milliseconds(700)
        let h = try Harness(origin: nil, feeds: feeds, storeDirectory: dir + "/store", directory: dir)
        defer { h.shutdownService() }
        let s = h.service
        async let first = PagedRefreshTests.prefetch(s)
        try await Task.sleep(for: .milliseconds(100))
        async let joined = PagedRefreshTests.prefetch(s)
        let (a, b) = await (first, joined)
        for r in [a, b] {
            guard case .failure(let e) = r else { Issue.record("a walk past feed-timeout succeeded: \(r)"); continue }
            #expect("\(e)".contains("the refresh took more than feed-timeout 0.7 s"), "\(e)")
        }
        #expect(s.store.postsKnown == false, "nothing of the feed was stored")
        #expect(try origin.requests().count < 10, "no page was asked for past the deadline")
    }
}
