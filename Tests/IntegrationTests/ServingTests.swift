import Foundation
import Testing
import CacheProtocol
import CacheStore
import CacheSystem

/// The real daemon against the real origin: prefetch, every op, restart offline.
@Suite struct ServingTests {
    @Test func prefetchStoresEveryPostAndImage() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(true), "\(r)")
        #expect(r["posts"]?["fetched"]?.int == 100)
        #expect(r["posts"]?["invalid"]?.int == 0)
        #expect(r["images"]?["downloaded"]?.int == 16)
        #expect(r["images"]?["failed"]?.int == 0)
        #expect(r["failures"] == .array([]))

        let status = try daemon.call("status")
        #expect(status["posts"]?.int == 100)
        #expect(status["images"]?.int == 16)
        #expect(status["images_cached"]?.int == 16)
        #expect(status["objects"]?.int == 15, "rows 0 and 15 have identical bytes")
        for key in ["bytes", "max_bytes", "uptime_s"] { #expect(status[key]?.integer != nil, "\(key)") }
        for key in ["hits", "misses", "downloads", "download_bytes", "coalesced", "errors"] {
            #expect(status["counters"]?[key]?.integer != nil, "counters.\(key)")
        }
        // Every post file and object file is on disk, named as docs/storage-format.md says.
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/posts").count == 100)
        #expect(try daemon.objectFiles().count == 15)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty)
    }

    @Test func postsAreServedAsTheOriginSentThemInAscendingOrder() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let feed = try JSONParser.parse(origin.read("posts.json")).array ?? []
        let post = try daemon.call("get_post", [("id", num(7))])
        #expect(post["post"] == feed.first { $0["id"]?.integer == 7 })

        let all = try daemon.call("list_posts")
        #expect(all["total"]?.int == 100)
        let ids = all["posts"]?.array?.compactMap { $0["id"]?.integer } ?? []
        #expect(ids == Array(1...100))

        let page = try daemon.call("list_posts", [("offset", num(95)), ("limit", num(10))])
        #expect(page["total"]?.int == 100)
        #expect(page["posts"]?.array?.compactMap { $0["id"]?.integer } == [96, 97, 98, 99, 100])
        let empty = try daemon.call("list_posts", [("offset", num(500))])
        #expect(empty["posts"] == .array([]))
    }

    @Test func imagesCarryEveryFieldAndReadSendsVerifiedBytes() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let manifest = try JSONParser.parse(origin.read("images/manifest.json")).array ?? []
        let list = try daemon.call("list_images")
        #expect(list["total"]?.int == manifest.count)
        for (row, entry) in manifest.enumerated() {
            let answer = try daemon.call("get_image", [("row", num(row))])
            let image = try #require(answer["image"], "\(answer)")
            let file = try origin.read("images/" + (entry["url"]?.string ?? ""))
            #expect(image["row"]?.int == row)
            #expect(image["url"]?.string == origin.base + "/images/" + (entry["url"]?.string ?? ""))
            #expect(image["description"] == entry["description"])
            #expect(image["hash"]?.string == Hash128(of: file).hex)
            #expect(image["size"]?.int == file.count)
            #expect(image["type"]?.string?.hasPrefix("image/") == true)
            let path = try #require(image["path"]?.string)
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == file)
            #expect(list["images"]?.array?[row] == image)

            let client = try daemon.client()
            try client.send(Request.line(op: "read", [("hash", image["hash"]!)]))
            let header = try client.readJSON()
            #expect(header["size"]?.int == file.count)
            var bytes: [UInt8] = []
            try client.readBytes(file.count) { bytes += $0 }
            #expect(bytes == file)
            #expect(try client.call("ping")["ok"] == .bool(true), "the connection is usable after the bytes")
        }
    }

    @Test func identicalBytesUnderTwoURLsAreOneObjectFile() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        let a = try daemon.call("get_image", [("row", num(0))])["image"]
        let b = try daemon.call("get_image", [("row", num(15))])["image"]
        #expect(a?["hash"] != nil && a?["hash"] == b?["hash"])
        #expect(a?["path"] == b?["path"])
        #expect(a?["url"] != b?["url"])
        let hex = try #require(a?["hash"]?.string)
        #expect(try daemon.objectFiles().filter { $0 == hex }.count == 1)
    }

    @Test func restartWithTheOriginDownServesEverythingWithoutDownloading() throws {
        let origin = try Origin()
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, scratch: scratch)
        _ = try daemon.call("prefetch")
        let posts = try daemon.call("list_posts")
        let images = try daemon.call("list_images")
        #expect(daemon.stop() == 0)
        origin.stop()

        daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("list_posts") == posts)
        #expect(try daemon.call("list_images") == images)
        for row in 0..<(images["total"]?.int ?? 0) {
            let image = try daemon.call("get_image", [("row", num(row))])
            #expect(image["ok"] == .bool(true), "row \(row): \(image)")
            let client = try daemon.client()
            try client.send(Request.line(op: "read", [("hash", image["image"]?["hash"] ?? .null)]))
            #expect(try client.readJSON()["size"] == image["image"]?["size"])
        }
        let status = try daemon.call("status")
        #expect(status["counters"]?["downloads"]?.int == 0)
        #expect(status["counters"]?["hits"]?.int == 16)
        // A prefetch with the origin down fails clearly and changes nothing.
        let failed = try daemon.call("prefetch")
        #expect(failed["error"]?["code"]?.string == "upstream")
        #expect(failed["error"]?["message"]?.string?.contains(origin.postsURL) == true, "\(failed)")
        #expect(try daemon.call("list_posts") == posts)
    }

    @Test func missingThingsAreNotFound() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        #expect(try daemon.call("get_post", [("id", num(100_000))])["error"]?["code"] == .string("not_found"))
        #expect(try daemon.call("get_post", [("id", num(-1))])["error"]?["code"] == .string("not_found"))
        #expect(try daemon.call("get_image", [("row", num(16))])["error"]?["code"] == .string("not_found"))
        #expect(try daemon.call("read", [("hash", .string(String(repeating: "0", count: 32)))])["error"]?["code"] == .string("not_found"))
    }

    @Test func fetchFalseOnAnUncachedRowIsNotCached() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let r = try daemon.call("get_image", [("row", num(2)), ("fetch", .bool(false))])
        #expect(r["error"]?["code"] == .string("not_cached"), "\(r)")
        #expect(try origin.count("/images/03-forest.png") == 0)
        #expect(try daemon.call("get_image", [("row", num(2))])["ok"] == .bool(true))
        #expect(try daemon.call("get_image", [("row", num(2)), ("fetch", .bool(false))])["ok"] == .bool(true))
    }

    @Test func maintenanceOpsAnswerWithTheirFields() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let verify = try daemon.call("verify")
        #expect(verify["checked"]?.int == 15)
        #expect(verify["corrupt"] == .array([]))
        #expect(verify["repaired"]?.int == 0)
        let gc = try daemon.call("gc")
        #expect(gc["removed"]?.int == 0)
        #expect(gc["freed_bytes"]?.int == 0)
        let compact = try daemon.call("compact")
        #expect((compact["records_before"]?.int ?? 0) >= (compact["records_after"]?.int ?? 0))
        #expect((compact["records_after"]?.int ?? 0) > 0)
        #expect(try daemon.call("list_posts")["total"]?.int == 100)
        let ping = try daemon.call("ping")
        #expect(ping["protocol"]?.int == 1)
        #expect(ping["version"]?.string?.isEmpty == false)
    }

    @Test func aCorruptObjectIsNeverServedAndVerifyRepairsIt() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let (image, path) = try daemon.prefetchedImage(row: 4)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[bytes.count / 2] ^= 0x55
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let verify = try daemon.call("verify")
        #expect(verify["corrupt"] == .array([image["hash"]!]), "\(verify)")
        #expect(verify["repaired"]?.int == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine").count == 1)
        let again = try daemon.call("get_image", [("row", num(4))])["image"]
        #expect(again?["hash"] == image["hash"])
        #expect(Hash128(of: Array(try Data(contentsOf: URL(fileURLWithPath: path)))).hex == image["hash"]?.string)
    }

    @Test func verifyFetchesAgainAnObjectWhoseFileVanished() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let (image, path) = try daemon.prefetchedImage(row: 7)
        try FileManager.default.removeItem(atPath: path)
        let verify = try daemon.call("verify")
        #expect(verify["corrupt"] == .array([image["hash"]!]), "\(verify)")
        #expect(verify["repaired"]?.int == 1)
        #expect(Hash128Hex.of(path) == image["hash"]?.string, "the file is back")
        #expect(try origin.count("/images/08-stripes.png") == 2)
    }
}

