import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Read-through, single flight and the feed rules of docs/protocol.md, "Feeds".
@Suite struct FetchingTests {
    /// `prefetch --force` while an unforced prefetch walks the feed: the
    /// force is not answered by the running walk's conditional request (a
    /// 304), but walks the feed again without validators once it ends.
    @Test func aForcedPrefetchDuringAnUnforcedOneStillFetchesWithoutValidators() throws {
        let origin = try Origin(delay: 1.0)
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let before = try origin.requests().count
        let asked = try origin.count("/posts.json")

        let unforced = try daemon.client()
        try unforced.send(Request.line(op: "prefetch", [("what", .string("posts"))]))
        // Its walk is under way once the origin counted its request (the count
        // comes before the 1 s delay): the force then finds it running.
        #expect(waitUntil(10) { ((try? origin.count("/posts.json")) ?? 0) > asked })
        let forced = try daemon.call("prefetch", [("what", .string("posts")), ("force", .bool(true))])
        #expect(forced["ok"] == .bool(true), "\(forced)")
        #expect(try unforced.readJSON()["ok"] == .bool(true))

        let requested = try origin.requests().dropFirst(before).filter { $0.path == "/posts.json" }
        let conditional = requested.map { $0.ifNoneMatch != nil || $0.ifModifiedSince != nil }
        #expect(conditional == [true, false], "the unforced walk's conditional request, then the forced one's: \(requested.map { ($0.ifNoneMatch, $0.ifModifiedSince) })")
        #expect(requested.first?.status == 304 && requested.last?.status == 200, "\(requested.map(\.status))")
    }

    /// One row added at the top of the manifest shifts every row: each
    /// keeps its image by URL, and only the new one is downloaded (before,
    /// all of them were, unconditionally).
    @Test func aRowAddedAtTheTopDownloadsOnlyItsOwnImage() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let first = try daemon.call("prefetch", [("what", .string("images"))])
        let rows = try #require(first["images"]?["downloaded"]?.int)
        let path = origin.root + "/images/manifest.json"
        var manifest = try String(contentsOfFile: path, encoding: .utf8)
        manifest = manifest.replacingOccurrences(of: "[", with: #"[{"url": "00-new.png", "description": "new"},"#, options: [], range: manifest.range(of: "["))
        try manifest.write(toFile: path, atomically: true, encoding: .utf8)
        // Dated later: the origin's validators (from the time) change with it.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: path)
        try FileManager.default.copyItem(atPath: origin.root + "/images/01-sunrise.png", toPath: origin.root + "/images/00-new.png")
        let before = try origin.counts()

        let second = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(second["images"]?["downloaded"]?.int == 1 && second["images"]?["transfers"]?.int == 1, "\(second)")
        #expect(second["images"]?["cached"]?.int == rows, "\(second)")
        let after = try origin.counts()
        let fetchedAgain = after.filter { $0.key.hasSuffix(".png") && $0.key != "/images/00-new.png" && $0.value != before[$0.key] }
        #expect(fetchedAgain.isEmpty, "\(fetchedAgain)")
        #expect(try daemon.call("get_image", [("row", num(1)), ("fetch", .bool(false))])["ok"] == .bool(true), "row 1, the old row 0, is cached")
    }

    @Test func concurrentRequestsForAnUncachedRowMakeOneDownload() throws {
        let origin = try Origin(delay: 0.3)
        let daemon = try Daemon(origin: origin)
        let socket = daemon.socket
        let answers = Locked<[JSON]>([])
        onThreads(24) { _ in
            let a = (try? Client(socketPath: socket).call("get_image", [("row", num(6))])) ?? .null
            answers.withLock { $0.append(a) }
        }
        let all = answers.withLock { $0 }
        #expect(all.count == 24)
        let hashes = Set(all.compactMap { $0["image"]?["hash"]?.string })
        #expect(hashes.count == 1, "\(all.filter { $0["ok"] != .bool(true) })")
        #expect(try origin.count("/images/07-checker.png") == 1)
        #expect(try origin.count("/images/manifest.json") == 1, "the manifest is fetched once for everyone")
        let counters = try daemon.call("status")["counters"]
        #expect(counters?["downloads"]?.int == 1)
        #expect((counters?["coalesced"]?.int ?? 0) >= 1)
        // Cached now: no more downloads, ever.
        _ = try daemon.call("get_image", [("row", num(6))])
        #expect(try origin.count("/images/07-checker.png") == 1)
    }

    @Test func aPrefetchAndReadThroughAtTheSameTimeDownloadEachImageOnce() throws {
        let origin = try Origin(delay: 0.2)
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("list_images")
        let socket = daemon.socket
        let done = Locked(0)
        onThreads(9) { i in
            if i == 0 { _ = try? Client(socketPath: socket).call("prefetch", [("what", .string("images"))]) }
            else { _ = try? Client(socketPath: socket).call("get_image", [("row", num(i))]) }
            done.withLock { $0 += 1 }
        }
        let counts = try origin.counts()
        for (path, n) in counts where path.hasPrefix("/images/") && path != "/images/manifest.json" {
            #expect(n == 1, "\(path) fetched \(n) times")
        }
    }

    @Test func aPostsRefreshMirrorsTheFeed() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        // Drop posts 1-10, change post 11, add post 500 and two invalid elements.
        var feed = try JSONParser.parse(origin.read("posts.json")).array ?? []
        feed.removeFirst(10)
        feed[0] = .object([("userId", num(2)), ("id", num(11)), ("title", .string("changed")), ("body", .null), ("tags", .array([.string("new field")]))])
        feed.append(.object([("id", num(500)), ("title", .string("new"))]))
        feed.append(.object([("title", .string("no id"))]))  // invalid
        feed.append(.object([("id", .string("12")), ("title", .string("string id"))]))
        try origin.write("posts.json", bytes: JSON.array(feed).encoded)

        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["posts"]?["fetched"]?.int == 3, "11, 500 and the string id \"12\": \(r)")
        #expect(r["posts"]?["unchanged"]?.int == 89)
        #expect(r["posts"]?["removed"]?.int == 10)
        #expect(r["posts"]?["invalid"]?.int == 1)
        #expect(r["images"] == .null)
        #expect(try daemon.call("get_post", [("id", num(5))])["error"]?["code"] == .string("not_found"))
        #expect(try daemon.call("get_post", [("id", num(11))])["post"] == feed[0])
        #expect(try daemon.call("list_posts")["total"]?.int == 92)
        // With a string id among them, the list is in the feed's order.
        #expect(try daemon.call("list_posts")["ids"]?.array?.last == .string("12"))
        #expect(!FileManager.default.fileExists(atPath: daemon.store + "/posts/5.json"))
        #expect(FileManager.default.fileExists(atPath: daemon.store + "/posts/500.json"))
    }

    @Test(arguments: ["[{\"id\": 1,", "{\"not\": \"an array\"}", "<html>502 Bad Gateway</html>", ""])
    func anInvalidFeedChangesNothing(_ body: String) throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let posts = try daemon.call("list_posts")
        let images = try daemon.call("list_images")
        try origin.write("posts.json", body)
        try origin.write("images/manifest.json", body)
        for what in ["posts", "images", "all"] {
            let r = try daemon.call("prefetch", [("what", .string(what)), ("force", .bool(true))])
            #expect(r["ok"] == .bool(false))
            #expect(r["error"]?["code"] == .string("upstream"))
            let message = r["error"]?["message"]?.string ?? ""
            #expect(message.contains(what == "images" ? origin.manifestURL : origin.postsURL), "\(message)")
            #expect(message.contains("JSON"), "\(message)")
        }
        #expect(try daemon.call("list_posts") == posts)
        #expect(try daemon.call("list_images") == images)
    }

    @Test func aMissingFeedIsAnUpstreamErrorNamingTheStatus() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--posts-url", origin.base + "/nothing-here.json"])
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["error"]?["code"] == .string("upstream"))
        #expect(r["error"]?["message"]?.string?.contains("HTTP 404") == true, "\(r)")
        #expect(try origin.count("/nothing-here.json") == 1, "4xx is not retried")
    }

    @Test func transientServerErrorsAreRetriedWithBackoff() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        try origin.fail("/posts.json", times: 2, status: 503)
        try origin.fail("/images/02-ocean.png", times: 3, status: 500)
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(true), "\(r)")
        #expect(r["posts"]?["fetched"]?.int == 100)
        #expect(r["images"]?["failed"]?.int == 0, "\(r)")
        #expect(try origin.count("/posts.json") == 3)
        #expect(try origin.count("/images/02-ocean.png") == 4)
    }

    @Test func serverErrorsPastTheRetriesFailClearly() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        try origin.fail("/images/03-forest.png", times: 10, status: 503)
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        let failure = try #require(r["failures"]?.array?.first)
        #expect(failure["row"]?.int == 2)
        #expect(failure["error"]?.string == "HTTP 503 (after 4 attempts)", "\(failure)")
        #expect(try origin.count("/images/03-forest.png") == 4)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }

    @Test func anUnchangedFeedIsRevalidatedNotDownloaded() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let r = try daemon.call("prefetch")
        #expect(r["posts"]?["unchanged"]?.int == 100)
        #expect(r["posts"]?["fetched"]?.int == 0)
        #expect(r["images"]?["cached"]?.int == 16)
        #expect(r["images"]?["downloaded"]?.int == 0)
        #expect(try origin.count("/posts.json") == 2)
        #expect(try origin.count("/images/01-sunrise.png") == 1)
        let forced = try daemon.call("prefetch", [("force", .bool(true))])
        #expect(forced["images"]?["downloaded"]?.int == 16)
        #expect(try origin.count("/images/01-sunrise.png") == 2)
    }

    @Test func nonImageBytesAreAFailedDownloadNotAnImage() throws {
        let origin = try Origin()
        try origin.write("images/broken.png", "<!DOCTYPE html><html><body>Oops</body></html>")
        var manifest = try JSONParser.parse(origin.read("images/manifest.json")).array ?? []
        manifest.append(.object([("url", .string("broken.png")), ("description", .string("an error page"))]))
        manifest.append(.object([("url", .string("missing.png"))]))
        manifest.append(.object([("url", .string("file:///etc/passwd"))]))
        try origin.write("images/manifest.json", bytes: JSON.array(manifest).encoded)
        let daemon = try Daemon(origin: origin)
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(r["ok"] == .bool(true))
        #expect(r["images"]?["downloaded"]?.int == 16)
        #expect(r["images"]?["failed"]?.int == 3)
        let failures = r["failures"]?.array ?? []
        #expect(failures.map { $0["row"]?.int } == [16, 17, 18])
        #expect(failures[0]["error"]?.string?.contains("not an image") == true, "\(failures[0])")
        #expect(failures[1]["error"]?.string?.contains("HTTP 404") == true, "\(failures[1])")
        #expect(failures[2]["error"]?.string?.contains("http") == true, "\(failures[2])")
        let row = try daemon.call("get_image", [("row", num(16))])
        #expect(row["error"]?["code"] == .string("upstream"))
        #expect(try daemon.call("status")["objects"]?.int == 15)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }

    @Test func maxObjectSizeRefusesLargerBodies() throws {
        let origin = try Origin()
        // Three images (3.2 to 10.3 KiB) do not fit; the posts feed (larger) does: feeds have feed-max-size.
        let daemon = try Daemon(origin: origin, arguments: ["--max-object-size", "3K"])
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        let failures = r["failures"]?.array ?? []
        #expect(failures.map { $0["row"]?.int } == [2, 8, 13], "\(failures)")
        #expect(failures.allSatisfy { $0["error"]?.string?.contains("larger than max-object-size 3 KiB") == true }, "\(failures)")
        let posts = try daemon.call("prefetch", [("what", .string("posts"))])
        let fetched = posts["posts"]?["fetched"]?.int ?? 0
        #expect(fetched > 0, "a feed over max-object-size but under feed-max-size is read: \(posts)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }

    @Test func feedMaxSizeRefusesLargerFeedDocumentsAndNamesItself() throws {
        let origin = try Origin()
        // The manifest (about 1.3 KiB) fits, the posts feed does not; images keep max-object-size's default.
        let daemon = try Daemon(origin: origin, arguments: ["--feed-max-size", "3K"])
        let posts = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(posts["error"]?["message"]?.string?.contains("larger than feed-max-size 3 KiB") == true, "\(posts)")
        let images = try daemon.call("prefetch", [("what", .string("images"))])
        let imageFailures = images["failures"]?.array ?? []
        #expect(imageFailures.isEmpty, "\(images)")
        #expect(try daemon.call("status")["posts"]?.int == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }

    @Test func maxSizeEvictsAndEvictedRowsComeBackOnDemand() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--max-size", "8K"])
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        let status = try daemon.call("status")
        #expect((status["bytes"]?.int ?? .max) <= 8192, "\(status)")
        #expect(status["max_bytes"]?.int == 8192)
        #expect((status["images_cached"]?.int ?? 16) < 16)
        let list = try daemon.call("list_images")["images"]?.array ?? []
        let evicted = try #require(list.first { $0["hash"] == .null })
        let again = try daemon.call("get_image", [("row", evicted["row"] ?? .null)])
        #expect(again["ok"] == .bool(true), "\(again)")
    }
}
