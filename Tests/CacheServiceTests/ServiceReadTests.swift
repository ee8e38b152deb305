import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// Posts, images and objects over a real store and the fault origin.
@Suite struct ServiceReadTests {
    @Test func postsAreNotFoundBeforeAnyFetchThenServedAsTheOriginWroteThem() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service

        guard case .failure(.notFound(let what)) = s.post(id: 1) else {
            Issue.record("post 1 before any fetch: \(s.post(id: 1))"); return
        }
        #expect(what.contains("posts were never fetched"), "\(what)")
        #expect(s.posts(offset: 0, limit: nil).total == 0)

        let report = await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }
        let posts = try report.get().posts
        #expect(posts?.fetched == 100)
        #expect(posts?.invalid == 0)
        #expect(try report.get().images == nil, "a posts prefetch does no images")

        let expected = try ExampleOrigin.minifiedPosts()
        try #require(expected.count == 100)
        for (id, index) in [(1, 0), (2, 1), (100, 99)] {
            #expect(try s.post(id: .int(Int64(id))).get().json == expected[index], "post \(id)")
        }
        // A post the feed does not have: not found, and no "never fetched" hint now.
        guard case .failure(.notFound(let missing)) = s.post(id: 101) else {
            Issue.record("post 101: \(s.post(id: 101))"); return
        }
        #expect(!missing.contains("never fetched"), "\(missing)")

        let page = s.posts(offset: 10, limit: 5)
        #expect(page.total == 100)
        #expect(Array(page.posts) == Array(expected[10..<15]))
        let tail = s.posts(offset: 98, limit: 5)
        #expect(tail.total == 100)
        #expect(Array(tail.posts) == Array(expected[98...]))
        #expect(s.posts(offset: 0, limit: nil).posts.map { $0 } == expected)
        let past = s.posts(offset: 500, limit: 3)
        #expect(past.total == 100)
        #expect(past.posts.isEmpty)
        #expect(s.status().posts == 100)
    }

    @Test func imageRowsFromManifestToMissToHit() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let names = try ExampleOrigin.manifestURLs()
        try #require(names.count == 16)

        // Never fetched manifest: later, and the manifest is fetched (row 0 is then not cached).
        let first = await answer { s.image(row: 0, fetch: false, then: $0) }
        #expect(!first.isNow)
        guard case .failure(.notCached(row: 0)) = first.result else { Issue.record("row 0 without fetch: \(first.result)"); return }
        let log = try await h.origin!.requests(atLeast: 1)
        #expect(log.map(\.path) == ["/images/manifest.json"])
        #expect(s.status().images == 16)

        // Manifest known, row not cached, no fetch: now.
        let uncached = await answer { s.image(row: 1, fetch: false, then: $0) }
        #expect(uncached.isNow)
        guard case .failure(.notCached(row: 1)) = uncached.result else { Issue.record("row 1 without fetch: \(uncached.result)"); return }

        // With fetch: later, and the object on disk is the origin's PNG.
        let miss = await answer { s.image(row: 1, fetch: true, then: $0) }
        #expect(!miss.isNow)
        let entry = try miss.result.get()
        let png = try h.origin!.file("images/" + names[1])
        #expect(entry.row == 1)
        #expect(entry.url == h.url("/images/" + names[1]))
        let object = try #require(entry.object)
        #expect(object.mimeType == "image/png")
        #expect(object.size == Int64(png.count))
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: object.path))) == png)
        #expect(object.path.hasPrefix(s.storeDirectory + "/objects/"))
        let afterMiss = s.status().counters
        #expect(afterMiss.misses == 1)
        #expect(afterMiss.downloads == 1)
        #expect(afterMiss.downloadBytes == Int64(png.count))

        // The next call is a hit, answered now.
        let hit = await answer { s.image(row: 1, fetch: false, then: $0) }
        #expect(hit.isNow)
        #expect(hit.value == entry)
        #expect(s.status().counters.hits == afterMiss.hits + 1)
        #expect(s.status().imagesCached == 1)

        // Rows that do not exist: now, not found (fetching or not).
        for row in [16, 1000, -1] {
            let none = await answer { s.image(row: row, fetch: true, then: $0) }
            #expect(none.isNow, "row \(row)")
            guard case .failure(.notFound(let what)) = none.result else { Issue.record("row \(row): \(none.result)"); continue }
            #expect(what.contains("16 rows"), "\(what)")
        }
        // One manifest fetch and one image download in all.
        #expect(try h.origin!.requests().map(\.path) == ["/images/manifest.json", "/images/" + names[1]])
    }

    @Test func imagesListTheManifestWithAbsoluteURLs() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let names = try ExampleOrigin.manifestURLs()

        let never = await answer { s.images(offset: 0, limit: nil, then: $0) }
        #expect(!never.isNow, "the manifest was never fetched")
        let all = try never.result.get()
        #expect(all.total == 16)
        #expect(all.images.map(\.row) == Array(0..<16))
        #expect(all.images.map(\.url) == names.map { h.url("/images/" + $0) })
        #expect(all.images.allSatisfy { $0.object == nil })
        #expect(all.images[0].description == "Sunrise (png)")

        let page = await answer { s.images(offset: 14, limit: 5, then: $0) }
        #expect(page.isNow)
        let tail = try page.result.get()
        #expect(tail.total == 16)
        #expect(tail.images.map(\.row) == [14, 15])
        #expect(tail.images.map(\.url) == names[14...].map { h.url("/images/" + $0) })

        // A cached row shows its object in the list.
        let got = try await answer { s.image(row: 14, fetch: true, then: $0) }.result.get()
        let again = await answer { s.images(offset: 14, limit: 1, then: $0) }
        #expect(again.isNow)
        #expect(again.value?.images == [got])
        #expect(again.value?.images.first?.object != nil)

        let past = await answer { s.images(offset: 40, limit: 2, then: $0) }
        #expect(past.isNow)
        #expect(past.value?.total == 16)
        #expect(past.value?.images.isEmpty == true)
        #expect(try h.origin!.requests().filter { $0.path == "/images/manifest.json" }.count == 1)
    }

    @Test func objectsByHash() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let prefix: @Sendable (Int64) -> [UInt8] = { Array("OK \($0)\n".utf8) }

        // (A hash that is not 32 lowercase hex digits never reaches the service:
        // the protocol's parser refuses it, RequestTests.rejectsBadRequests.)
        let entry = try await answer { s.image(row: 2, fetch: true, then: $0) }.result.get()
        let object = try #require(entry.object)
        let png = try h.origin!.file("images/" + (try ExampleOrigin.manifestURLs()[2]))
        let read = await answer { s.object(hash: object.hash, prefix: prefix, then: $0) }
        #expect(read.isNow, "a small object just written is in the page cache")
        switch read.result {
        case .success(.inline(let bytes)): #expect(bytes == prefix(Int64(png.count)) + png)
        case .success(.file(_, let fd, _)): fd.close(); Issue.record("a small cached object came as a file")
        case .failure(let e): Issue.record("read \(object.hash): \(e)")
        }

        let unknown = Hash128(high: 0, low: 0)
        let none = await answer { s.object(hash: unknown, prefix: prefix, then: $0) }
        #expect(!none.isNow)
        guard case .failure(.notFound(let what)) = none.result else { Issue.record("unknown hash: \(none.result)"); return }
        #expect(what.contains(unknown.hex))
    }

    @Test func aCorruptObjectIsQuarantinedAndServedAfterADownload() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let name = try ExampleOrigin.manifestURLs()[4]
        let entry = try await answer { s.image(row: 4, fetch: true, then: $0) }.result.get()
        let object = try #require(entry.object)
        let png = try h.origin!.file("images/" + name)
        try ServiceMaintenanceTests.corrupt(object.path)

        let read = await answer { s.object(hash: object.hash, prefix: { Array("OK \($0)\n".utf8) }, then: $0) }
        #expect(!read.isNow, "bytes that fail verification are never answered now")
        switch read.result {
        case .success(.file(let head, let fd, let size)):
            defer { fd.close() }
            #expect(head == Array("OK \(png.count)\n".utf8))
            #expect(size == Int64(png.count))
            var bytes = [UInt8](repeating: 0, count: png.count + 1)
            let n = bytes.withUnsafeMutableBytes { pread(fd.rawValue, $0.baseAddress, $0.count, 0) }
            #expect(n == png.count)
            #expect(Array(bytes.prefix(max(n, 0))) == png)
        case .success(.inline(let bytes)):
            #expect(bytes == Array("OK \(png.count)\n".utf8) + png)
        case .failure(let e):
            Issue.record("read of a corrupt object: \(e)")
        }
        #expect(s.status().counters.quarantined == 1)
        #expect(ServiceMaintenanceTests.contents(object.path) == png)
        let log = try await h.origin!.requests(atLeast: 3)
        #expect(log.filter { $0.path == "/images/" + name }.count == 2, "downloaded again")
    }
}

/// Listings larger than `inlineListLimit` are built on a worker (later), so
/// one client's long answer does not hold up the loop; small pages stay now.
@Suite struct LargeListingTests {
    @Test func aListingOfMoreThanTheInlineLimitIsBuiltLaterAndHoldsEveryEntry() async throws {
        let count = CacheService.inlineListLimit + 500
        let feed = "[" + (1...count).map { #"{"id":\#($0),"title":"post \#($0)"}"# }.joined(separator: ",") + "]"
        let h = try await Harness.start(extra: ["/big.json": Array(feed.utf8)], feeds: { Harness.feeds($0, posts: "/big.json") })
        defer { h.close() }
        let s = h.service
        let report = await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }
        #expect(try report.get().posts?.fetched == count)

        let all = await answer { s.posts(offset: 0, limit: nil, then: $0) }
        #expect(!all.isNow, "a page of \(count) posts is built on a worker")
        let page = try all.result.get()
        #expect(page.total == count)
        #expect(page.posts.count == count)
        #expect(page.posts.last == Array(#"{"id":\#(count),"title":"post \#(count)"}"#.utf8))

        let small = await answer { s.posts(offset: count - 10, limit: nil, then: $0) }
        #expect(small.isNow, "the last 10 posts are answered at once")
        #expect(try small.result.get().posts.count == 10)
        let limited = await answer { s.posts(offset: 0, limit: 5, then: $0) }
        #expect(limited.isNow)
    }

    @Test func aLargeImagesListingIsBuiltLaterToo() async throws {
        let count = CacheService.inlineListLimit + 200
        let manifest = "[" + (0..<count).map { #"{"url":"img/\#($0).png"}"# }.joined(separator: ",") + "]"
        let h = try await Harness.start(extra: ["/big-manifest.json": Array(manifest.utf8)],
                                        feeds: { Harness.feeds($0, images: "/big-manifest.json") })
        defer { h.close() }
        let s = h.service
        let first = await answer { s.images(offset: 0, limit: 3, then: $0) }
        #expect(!first.isNow, "the manifest is fetched first")
        let all = await answer { s.images(offset: 0, limit: nil, then: $0) }
        #expect(!all.isNow, "a page of \(count) rows is built on a worker")
        #expect(try all.result.get().images.count == count)
        #expect(try all.result.get().images.last?.row == count - 1)
        let small = await answer { s.images(offset: 0, limit: 10, then: $0) }
        #expect(small.isNow)
    }
}
