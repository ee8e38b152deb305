import Foundation
import Testing
import Glibc
import CacheProtocol
import CacheSystem

/// `min-free-space` on a real small tmpfs (docs/storage-format.md, "A full
/// disk, a read-only store"): images read through before any prefetch stop
/// at the headroom, and the prefetch then stores every post (issue 24: on a
/// 400 KiB tmpfs the images had taken the disk and the prefetch stored none).
@Suite(.serialized) struct HeadroomTests {
    typealias SmallDisk = DiskFullTests.SmallDisk

    static let headroom = 768 << 10
    static let message = "min-free-space 768 KiB: image downloads are refused until space is freed (gc, max-size, or a larger disk)"

    /// A PNG of `size` bytes: the sample's bytes, then filler after its end.
    static func png(_ size: Int, seed: Int) throws -> [UInt8] {
        let sample = Array(try Data(contentsOf: URL(fileURLWithPath: Paths.packageRoot + "/Tests/Fixtures/images/sample.png")))
        return sample + (0..<(size - sample.count)).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ seed) }
    }

    /// Rows 0 and 1 images of 700 KiB, rows 2 to 25 images of 64 KiB.
    static func origin() throws -> Origin {
        let origin = try Origin()
        var rows: [JSON] = []
        for i in 0...1 {
            try origin.write("images/big-\(i).png", bytes: png(700 << 10, seed: 100 + i))
            rows.append(.object([("url", .string("big-\(i).png"))]))
        }
        for i in 2...25 {
            try origin.write("images/small-\(i).png", bytes: png(64 << 10, seed: i))
            rows.append(.object([("url", .string("small-\(i).png"))]))
        }
        try origin.write("images/manifest.json", bytes: JSON.array(rows).encoded)
        return origin
    }

    static func free(_ path: String) -> Int {
        var s = statvfs()
        return statvfs(path, &s) == 0 ? Int(s.f_bavail) * Int(s.f_frsize) : -1
    }

    @Test func readThroughsStopAtTheHeadroomAndThePrefetchStoresEveryPost() throws {
        let origin = try Self.origin()
        let scratch = Scratch()
        let disk = try SmallDisk(scratch, size: "2m")
        let store = disk.path + "/store"
        let daemon = try Daemon(origin: origin, arguments: ["--store", store, "--min-free-space", "768K"], scratch: scratch)

        // Downloads in flight count: the two big images together would
        // take the free space (about 1.9 MiB) under the headroom, so one is
        // refused, by its Content-Length before it starts or while it
        // streams or at its commit (which one depends on how they overlap).
        let socket = daemon.socket
        let bigs = Locked<[Int: JSON]>([:])
        onThreads(2) { row in
            let r = (try? Client(socketPath: socket).call("get_image", [("row", num(row))])) ?? .null
            bigs.withLock { $0[row] = r }
        }
        let answers = bigs.withLock { $0 }.sorted { $0.key < $1.key }.map(\.value)
        let bigStored = answers.filter { $0["ok"] == .bool(true) }.count
        #expect(bigStored <= 1, "\(answers)")
        for r in answers where r["ok"] != .bool(true) {
            #expect(r["error"]?["code"] == .string("internal") && r["error"]?["message"]?.string?.contains(Self.message) == true, "\(r)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store + "/tmp").isEmpty, "no partial file")
        #expect(Self.free(disk.path) >= Self.headroom, "the headroom is kept: \(Self.free(disk.path)) free")

        // Read-throughs one by one, as the page and clients do before any
        // prefetch: they are stored until the headroom, then refused.
        var stored = 0
        var refused: [Int] = []
        for row in 2...25 {
            let r = try daemon.call("get_image", [("row", num(row))])
            if r["ok"] == .bool(true) { #expect(refused.isEmpty, "row \(row) stored after a refusal"); stored += 1; continue }
            let text = r["error"]?["message"]?.string ?? ""
            #expect(r["error"]?["code"] == .string("internal") && text.hasPrefix("row \(row) ") && text.contains(Self.message), "\(r)")
            refused.append(row)
        }
        print("[headroom] \(stored) of 24 read-throughs stored, then refused with \(Self.free(disk.path)) bytes free")
        #expect(stored >= 3 && !refused.isEmpty, "stored \(stored), refused \(refused)")
        #expect(Self.free(disk.path) >= Self.headroom - (64 << 10), "the headroom is kept: \(Self.free(disk.path)) free")
        // Refused before the request, or by its Content-Length: never downloaded twice.
        for row in refused { #expect(try origin.count("/images/small-\(row).png") <= 1, "row \(row)") }
        #expect(try daemon.call("status")["counters"]?["upstream_errors"]?.int == 0, "the store, not the origin, refused")

        // The prefetch stores every post; the images it cannot store are its failures (exit 5).
        let r = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(r.status == 5, "\(r.stdout)\(r.stderr)")
        let cached = bigStored + stored
        #expect(r.stdout.hasPrefix("posts:  100 fetched, 0 unchanged, 0 removed, 0 invalid\nimages: 0 downloaded, \(cached) already cached, 0 revalidated (0 changed, 0 unchanged), \(26 - cached) failed"), "\(r.stdout)")
        #expect(r.stdout.components(separatedBy: Self.message).count - 1 == 26 - cached, "\(r.stdout)")
        #expect(r.stderr == "cachectl: \(26 - cached) images failed to download\n", "\(r.stderr)")
        #expect(try daemon.call("list_posts")["total"]?.int == 100)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store + "/posts").count == 100)
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
        #expect(daemon.log.contains(Self.message), "the refusals are logged")
        #expect(daemon.stop() == 0)
    }

    /// Issue 33: posts ignored every disk rule, and two million tiny posts
    /// wrote 7.7 GB of files. A refresh whose files (each at least one
    /// block) would leave less than `posts-min-free-space` is refused
    /// before anything is written; the posts stay as they were, and a
    /// refresh that only removes posts is never refused.
    @Test func aPostsRefreshThatWouldLeaveTooLittleFreeIsRefusedKeepingThePosts() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let disk = try SmallDisk(scratch, size: "2m")
        let store = disk.path + "/store"
        let daemon = try Daemon(origin: origin, arguments: ["--store", store, "--min-free-space", "0", "--posts-min-free-space", "1M"], scratch: scratch)
        func posts(_ ids: ClosedRange<Int>) throws {
            try origin.write("posts.json", bytes: JSON.array(ids.map { .object([("id", num($0)), ("title", .string("post \($0)"))]) }).encoded)
        }
        try posts(1...40)
        var r = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        #expect(r.status == 0 && r.stdout.hasPrefix("posts:  40 fetched"), "\(r.stdout)\(r.stderr)")

        // 300 more posts take 300 blocks of 4 KiB: about 1.2 MiB of the 2 MiB disk.
        try posts(1...340)
        r = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("(300 post files and their log records) and leave less than posts-min-free-space 1 MiB of the store's"), "\(r.stderr)")
        #expect(r.stderr.contains("the posts stay as they were"), "\(r.stderr)")
        #expect(try daemon.call("list_posts")["total"]?.int == 40)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store + "/posts").count == 40, "no file was written")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store + "/tmp").isEmpty)
        #expect(Self.free(disk.path) > 1 << 20)

        // Fewer posts write no file: never refused, whatever the space.
        try posts(1...10)
        r = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        #expect(r.status == 0 && r.stdout.hasPrefix("posts:  0 fetched, 10 unchanged, 30 removed"), "\(r.stdout)\(r.stderr)")
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
        #expect(daemon.stop() == 0)
    }
}
