import Foundation
import Testing
import CacheProtocol

/// A feed never fetched is fetched once by its first read, over the socket
/// and over HTTP alike: `list_posts` and `GET /posts` as `list_images` and
/// `GET /images` (docs/protocol.md, "list_posts"; docs/http.md). Issue 24:
/// `/images` fetched a missing manifest, `/posts` never fetched the posts.
@Suite struct FirstReadTests {
    @Test func theFirstListingOfEachFeedFetchesItOnceOverTheSocket() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        #expect(try origin.count("/posts.json") == 0, "nothing is fetched at start")
        let posts = try daemon.call("list_posts")
        #expect(posts["total"]?.int == 100, "\(posts)")
        let images = try daemon.call("list_images")
        #expect(images["total"]?.int == 16, "\(images)")
        // Known now: later listings are answered from the store.
        #expect(try daemon.call("list_posts", [("limit", num(1))])["total"]?.int == 100)
        #expect(try daemon.call("list_images", [("limit", num(1))])["total"]?.int == 16)
        let counts = try origin.counts()
        #expect(counts["/posts.json"] == 1 && counts["/images/manifest.json"] == 1, "\(counts)")
        #expect(counts.keys.filter { $0.hasSuffix(".png") || $0.hasSuffix(".jpg") }.isEmpty, "a listing downloads no image")
    }

    @Test func theFirstListingOfEachFeedFetchesItOnceOverHTTP() throws {
        let origin = try Origin()
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: origin, arguments: ["--http-listen", "127.0.0.1:\(port)"])
        let posts = try SimpleHTTP.get(port: port, path: "/posts")
        #expect(posts.status == 200 && posts.headers["x-total-count"] == "100", "\(posts.status) \(posts.headers)")
        #expect(try JSONParser.parse(posts.body).array?.count == 100)
        let images = try SimpleHTTP.get(port: port, path: "/images")
        #expect(images.status == 200 && images.headers["x-total-count"] == "16", "\(images.status) \(images.headers)")
        _ = try SimpleHTTP.get(port: port, path: "/posts")
        _ = try SimpleHTTP.get(port: port, path: "/images")
        let counts = try origin.counts()
        #expect(counts["/posts.json"] == 1 && counts["/images/manifest.json"] == 1, "\(counts)")
        #expect(daemon.isRunning)
    }

    /// `prefetch` (`all`) on a daemon that mirrors only a posts feed does
    /// that feed and succeeds (it exited 6, "images-url is not configured",
    /// and status said failed); `images` named on its own still fails.
    @Test func prefetchAllOfADaemonWithOnlyAPostsFeedSucceeds() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", origin.postsURL])
        let all = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(all.status == 0, "\(all)")
        let answer = try daemon.call("prefetch")
        #expect(answer["ok"] == .bool(true) && answer["posts"]?["unchanged"]?.int == 100 && answer["images"] == .null, "\(answer)")
        let status = try cachectl(["status"], socket: daemon.socket)
        #expect(!status.stdout.contains("failed"), "\(status.stdout)")
        let images = try cachectl(["prefetch", "images"], socket: daemon.socket)
        #expect(images.status == 6 && images.stderr.contains("images-url is not configured"), "\(images)")
    }

    /// A feed that cannot be fetched fails the first listing as it fails a
    /// prefetch (the same codes for both feeds), and a later one tries again.
    @Test func aFeedThatCannotBeFetchedFailsTheFirstListingOfBothAlike() throws {
        let unconfigured = try Daemon(origin: nil)
        let posts = try unconfigured.call("list_posts")
        let images = try unconfigured.call("list_images")
        #expect(posts["error"]?["code"] == .string("upstream") && posts["error"]?["message"]?.string?.hasPrefix("posts-url is not configured") == true, "\(posts)")
        #expect(images["error"]?["code"] == .string("upstream") && images["error"]?["message"]?.string?.hasPrefix("images-url is not configured") == true, "\(images)")

        let origin = try Origin()
        let feed = try origin.read("posts.json")
        try FileManager.default.removeItem(atPath: origin.root + "/posts.json")
        let daemon = try Daemon(origin: origin)
        let failed = try daemon.call("list_posts")
        #expect(failed["error"]?["code"] == .string("upstream") && failed["error"]?["message"]?.string?.contains("HTTP 404") == true, "\(failed)")
        try origin.write("posts.json", bytes: feed)
        #expect(try daemon.call("list_posts")["total"]?.int == 100, "the next listing tries again")
    }
}
