import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// A full disk and a read-only store, on a real small tmpfs.
@Suite(.serialized) struct DiskFullTests {
    /// Mounts a tmpfs of `size` at a fresh directory (needs root, as CI runs).
    final class SmallDisk {
        let path: String
        init(_ scratch: Scratch, size: String) throws {
            path = scratch.path + "/disk"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let r = run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
            try #require(r.status == 0, "cannot mount a tmpfs for the full-disk test (needs root): \(r.output)")
        }
        func remountReadOnly() -> Bool { run("/bin/mount", ["-o", "remount,ro", path]).status == 0 }
        /// Writes a filler file until the disk has no room left for a `chunk`.
        func fill(chunk size: Int) {
            let filler = path + "/filler"
            _ = FileManager.default.createFile(atPath: filler, contents: nil)
            guard let h = FileHandle(forWritingAtPath: filler) else { return }
            let chunk = Data(count: size)
            while (try? h.write(contentsOf: chunk)) != nil {}
            try? h.close()
        }
        deinit { _ = try? runProgram("/bin/umount", ["-l", path]) }

        func run(_ tool: String, _ args: [String]) -> (status: Int32, output: String) {
            (try? runProgram(tool, args)) ?? (-1, "cannot run \(tool)")
        }
    }

    @Test func aFullDiskFailsTheWriteCleanlyAndReadsGoOn() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let disk = try SmallDisk(scratch, size: "1m")
        // min-free-space 0: the disk itself fills, which is what is tested here.
        let daemon = try Daemon(origin: origin, arguments: ["--store", disk.path + "/store", "--min-free-space", "0"], scratch: scratch)
        #expect(try daemon.call("prefetch")["images"]?["downloaded"]?.int == 16)

        // Then a 2 MiB "PNG" that cannot fit on the 1 MiB disk. (Downloaded
        // alone: while it fills the disk, any write at the same time fails too.)
        try origin.write("images/huge.png", bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var manifest = try JSONParser.parse(origin.read("images/manifest.json")).array ?? []
        manifest.append(.object([("url", .string("huge.png"))]))
        try origin.write("images/manifest.json", bytes: JSON.array(manifest).encoded)
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(r["ok"] == .bool(true), "\(r)")
        let failures = r["failures"]?.array ?? []
        #expect(failures.map { $0["row"]?.int } == [16])
        #expect(failures.first?["error"]?.string?.contains("disk is full") == true, "\(failures)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path + "/store/tmp").isEmpty, "no partial file")
        #expect(try daemon.call("verify")["corrupt"] == .array([]))

        // A miss that cannot be stored is the store's failure, not the
        // origin's: it answers `internal` and is not an upstream error.
        let counters = try daemon.call("status")["counters"]
        #expect(counters?["upstream_errors"]?.int == 0, "the disk, not the origin, failed: \(String(describing: counters))")
        let miss = try daemon.call("get_image", [("row", num(16))])
        #expect(miss["error"]?["code"] == .string("internal"), "\(miss)")
        #expect(miss["error"]?["message"]?.string?.contains("disk is full") == true, "\(miss)")
        #expect(miss["error"]?["message"]?.string?.contains("row 16") == true, "\(miss)")
        #expect(try daemon.call("status")["counters"]?["upstream_errors"]?.int == 0)

        // Fill what is left, then change the feed: the refresh fails and changes nothing.
        let posts = try daemon.call("list_posts")
        disk.fill(chunk: 64 * 1024)
        var feed = try JSONParser.parse(origin.read("posts.json")).array ?? []
        for i in feed.indices { feed[i] = .object([("id", feed[i]["id"] ?? .null), ("title", .string(String(repeating: "longer title ", count: 40)))]) }
        try origin.write("posts.json", bytes: JSON.array(feed).encoded)
        let refresh = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(refresh["ok"] == .bool(false))
        #expect(refresh["error"]?["code"] == .string("internal"))
        #expect(refresh["error"]?["message"]?.string?.contains("disk is full") == true, "\(refresh)")
        #expect(try daemon.call("list_posts") == posts, "the old posts are still served")
        // Both feeds: the posts fail for the disk, the images go on and are
        // reported with the failure; cachectl prints them, then the store's error (exit 1).
        let all = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(all.status == 1, "\(all.stderr)")
        #expect(all.stdout.hasPrefix("images: 0 downloaded, 16 already cached, 0 revalidated (0 changed, 0 unchanged), 1 failed, 0 skipped; 1 transfers, 0 B\n  row 16 "), "\(all.stdout)")
        #expect(all.stderr.contains("disk is full") && all.stderr.hasSuffix("(internal)\n"), "\(all.stderr)")
        for p in (posts["posts"]?.array ?? []).prefix(10) {
            let id = p["id"]?.int ?? 0
            let file = Array(try Data(contentsOf: URL(fileURLWithPath: disk.path + "/store/posts/\(id).json")))
            #expect(try JSONParser.parse(file) == p, "posts/\(id).json holds the old post")
        }
        #expect(try daemon.call("get_image", [("row", num(3))])["ok"] == .bool(true))

        // Space comes back: the same refresh now succeeds.
        try FileManager.default.removeItem(atPath: disk.path + "/filler")
        let again = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(again["posts"]?["fetched"]?.int == 100, "\(again)")
        #expect(daemon.stop() == 0)

        // After a restart the store is consistent.
        let restarted = try Daemon(origin: origin, arguments: ["--store", disk.path + "/store", "--min-free-space", "0"], scratch: scratch)
        #expect(try restarted.call("get_post", [("id", num(1))])["post"] == feed[0])
        #expect(try restarted.call("verify")["corrupt"] == .array([]))
        #expect(restarted.stop() == 0)
    }

    @Test func aReadOnlyStoreIsRefusedWithAClearError() throws {
        let scratch = Scratch()
        let disk = try SmallDisk(scratch, size: "1m")
        let first = try Daemon(origin: nil, arguments: ["--store", disk.path + "/store"], scratch: scratch)
        #expect(first.stop() == 0)
        try #require(disk.remountReadOnly(), "cannot remount the tmpfs read-only")
        let daemon = try Daemon(origin: nil, arguments: ["--store", disk.path + "/store"], scratch: scratch, waitReady: false)
        #expect(daemon.waitForExit() == 1)
        #expect(daemon.log.contains("Read-only file system"), "\(daemon.log)")
    }

    @Test func aDamagedLogTailOnAFullDiskStillOpens() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let disk = try SmallDisk(scratch, size: "1m")
        let store = disk.path + "/store"
        var daemon = try Daemon(origin: origin, arguments: ["--store", store, "--min-free-space", "0"], scratch: scratch)
        #expect(try daemon.call("prefetch")["images"]?["downloaded"]?.int == 16)
        #expect(daemon.stop() == 0)
        // A torn tail (as a crash leaves), then a disk with no room to save a copy of it.
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: store + "/index.log"))
        try log.seekToEnd()
        try log.write(contentsOf: Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }))
        try log.close()
        disk.fill(chunk: 16 * 1024)
        daemon = try Daemon(origin: origin, arguments: ["--store", store, "--min-free-space", "0"], scratch: scratch)
        #expect(daemon.log.contains("index.log was damaged"), "\(daemon.log)")
        #expect(daemon.log.contains("to nowhere"), "the tail could not be saved, and the log says so: \(daemon.log)")
        #expect(try daemon.call("list_posts")["total"]?.int == 100)
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
        #expect(try daemon.call("get_image", [("row", num(3)), ("fetch", .bool(false))])["ok"] == .bool(true))
    }
}
