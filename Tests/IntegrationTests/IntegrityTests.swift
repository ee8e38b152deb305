import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Data-loss races and store integrity under real concurrent clients.
@Suite struct IntegrityTests {
    /// An origin whose manifest lists `count` small distinct PNGs (`many/N.png`).
    /// An origin whose manifest names `count` distinct PNG-signed images
    /// (`images/many/I.png`), each padded with `padding` bytes.
    static func manyImages(_ count: Int, round: Int = 0, padding: Int = 0) throws -> Origin {
        let origin = try Origin()
        try FileManager.default.createDirectory(atPath: origin.root + "/images/many", withIntermediateDirectories: true)
        var rows: [JSON] = []
        for i in 0..<count {
            let bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("image \(i) of round \(round)".utf8)
                + [UInt8](repeating: UInt8(i & 0x7f), count: padding)
            try origin.write("images/many/\(i).png", bytes: bytes)
            rows.append(.object([("url", .string("many/\(i).png")), ("description", .string("row \(i)"))]))
        }
        try origin.write("images/manifest.json", bytes: JSON.array(rows).encoded)
        return origin
    }

    /// Every row `list_images` reports as cached reads back its bytes.
    static func assertEveryCachedRowReads(_ daemon: Daemon, _ context: String) throws {
        let list = try daemon.call("list_images", [("limit", num(100_000))])
        var cached = 0
        for row in list["images"]?.array ?? [] {
            guard let hash = row["hash"]?.string else { continue }
            cached += 1
            let answer = try daemon.call("read", [("hash", .string(hash))])
            #expect(answer["ok"] == .bool(true), "\(context): row \(row["row"]?.int ?? -1) is listed as cached but reads \(answer)")
        }
        let status = try daemon.call("status")
        #expect(status["images_cached"]?.int == cached, "\(context): status agrees with list_images")
    }

    @Test func gcDuringAPrefetchNeverDeletesWhatTheIndexCallsCached() throws {
        let origin = try Self.manyImages(400)
        let daemon = try Daemon(origin: origin, arguments: ["--concurrency", "16"])
        for round in 0..<3 {
            if round > 0 {
                // Rotate the rows: the old objects become garbage while new ones arrive.
                var rows: [JSON] = []
                for i in 0..<400 {
                    let n = (i + round * 37) % 400
                    let bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("image \(n) of round \(round)".utf8)
                    try origin.write("images/many/r\(round)-\(n).png", bytes: bytes)
                    rows.append(.object([("url", .string("many/r\(round)-\(n).png"))]))
                }
                try origin.write("images/manifest.json", bytes: JSON.array(rows).encoded)
            }
            let done = LockedFlag()
            let socket = daemon.socket
            let gcs = LockedCounter()
            onThreads(2) { i in
                if i == 0 {
                    _ = try? Client(socketPath: socket).call("prefetch", [("what", .string("images"))])
                    done.set()
                } else {
                    guard let client = try? Client(socketPath: socket) else { return }
                    while !done.isSet {
                        if (try? client.call("gc"))?["ok"] == .bool(true) { gcs.increment() }
                    }
                }
            }
            #expect(gcs.value > 0, "gc ran during the prefetch")
            try Self.assertEveryCachedRowReads(daemon, "round \(round) after \(gcs.value) gc runs")
            let verify = try daemon.call("verify")
            #expect(verify["corrupt"]?.array?.count == 0, "\(verify)")
        }
    }
}

extension IntegrityTests {
    @Test func prefetchForceRepairsAnObjectDamagedOnDisk() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let (image, path) = try daemon.prefetchedImage(row: 3)
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        // Same length, other bytes: only a hash tells them apart.
        try Data(good.map { $0 ^ 0x5A }).write(to: URL(fileURLWithPath: path))
        let r = try daemon.call("prefetch", [("what", .string("images")), ("force", .bool(true))])
        #expect(r["ok"] == .bool(true), "\(r)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == good, "the good download replaced the damaged file")
        #expect(try daemon.call("read", [("hash", image["hash"] ?? .null)])["ok"] == .bool(true))
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine")
        #expect(quarantined.contains { $0.hasPrefix(image["hash"]?.string ?? "-") }, "the damaged bytes were kept aside: \(quarantined)")
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
    }
}

/// The store's own files removed or replaced under a running daemon.
@Suite struct StoreFileTamperingTests {
    /// Changes a post at the origin so the next posts prefetch must write.
    static func editPosts(_ origin: Origin, _ title: String) throws {
        var feed = try JSONParser.parse(origin.read("posts.json")).array ?? []
        feed[0] = .object([("userId", .number("1")), ("id", .number("1")), ("title", .string(title)), ("body", .string("b"))])
        try origin.write("posts.json", bytes: JSON.array(feed).encoded)
    }

    @Test func aDeletedLockDoesNotLetASecondDaemonIn() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let first = try Daemon(origin: origin, scratch: scratch)
        #expect(try first.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        try FileManager.default.removeItem(atPath: first.store + "/lock")
        let second = try Daemon(origin: origin, arguments: ["--socket", scratch.path + "/sock2"], scratch: scratch, waitReady: false)
        #expect(second.waitForExit() == 1)
        #expect(second.log.contains("is in use by"), "\(second.log)")
        // The first daemon noticed its lock is gone: it writes nothing more.
        try Self.editPosts(origin, "after the lock was deleted")
        let r = try first.call("prefetch", [("what", .string("posts"))])
        #expect(r["ok"] == .bool(false))
        #expect(r["error"]?["message"]?.string?.contains("/lock was deleted while the daemon ran") == true, "\(r)")
        #expect(first.log.contains("error: store writes stopped"))
    }

    @Test func aDeletedLogStopsWritesInsteadOfLosingThem() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        try FileManager.default.removeItem(atPath: daemon.store + "/index.log")
        try Self.editPosts(origin, "written after the log was deleted")
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["ok"] == .bool(false), "not acknowledged: \(r)")
        #expect(r["error"]?["message"]?.string?.contains("index.log was deleted while the daemon ran") == true, "\(r)")
        // Every later write is refused too, reads go on.
        let again = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(again["ok"] == .bool(false) && "\(again)".contains("store writes stopped"), "\(again)")
        #expect(try daemon.call("get_post", [("id", num(2))])["ok"] == .bool(true))
    }

    @Test func compactAndGcDoNotOverwriteAReplacedLog() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        let path = daemon.store + "/index.log"
        try FileManager.default.removeItem(atPath: path)
        try Data("someone else's file".utf8).write(to: URL(fileURLWithPath: path))
        for op in ["compact", "gc"] {
            let r = try daemon.call(op)
            #expect(r["ok"] == .bool(false) && r["error"]?["message"]?.string?.contains("store writes stopped") == true, "\(op): \(r)")
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "someone else's file", "the replacement was not overwritten")
    }

    @Test func aCutLogStopsWrites() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        let path = daemon.store + "/index.log"
        #expect(truncate(path, 100) == 0)
        try Self.editPosts(origin, "written after the log was cut")
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["ok"] == .bool(false), "\(r)")
        #expect(r["error"]?["message"]?.string?.contains("index.log was cut from") == true, "\(r)")
    }

    @Test func aReplacedLogStopsWrites() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        let path = daemon.store + "/index.log"
        try FileManager.default.copyItem(atPath: path, toPath: path + ".copy")
        #expect(rename(path + ".copy", path) == 0)
        try Self.editPosts(origin, "written after the log was replaced")
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["error"]?["message"]?.string?.contains("index.log was replaced by another file") == true, "\(r)")
    }
}

/// Bounds: descriptors, memory and queues under real limits.
@Suite struct BoundsTests {
    @Test func aPrefetchOfManyURLsHoldsAFewTempFilesNotOnePerRow() throws {
        let origin = try IntegrityTests.manyImages(1200)
        // 1,200 queued downloads under an open-file limit of 256: queued rows
        // must not hold a temp file each.
        let daemon = try Daemon(origin: origin, arguments: ["--max-connections", "64"],
                                launcher: ["/usr/bin/prlimit", "--nofile=256:256", "--"])
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(r["ok"] == .bool(true), "\(r)")
        #expect(r["images"]?["downloaded"]?.int == 1200, "\(r["images"] ?? .null)")
        let failures = r["failures"]?.array ?? []
        #expect(failures.count == 0, "the first failures: \(Array(failures.prefix(3)))")
    }
}

extension BoundsTests {
    @Test func progressForAClientThatNeverReadsIsBounded() throws {
        let origin = try IntegrityTests.manyImages(2000)
        let daemon = try Daemon(origin: origin, arguments: ["--concurrency", "16", "--max-queued-bytes", "64K"])
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let before = AbuseTests.rss(daemon.pid)
        // Asks for progress on a 2,000-row prefetch and reads nothing until it is over:
        // past what the kernel's socket buffer holds (about 250 small sends), the
        // events wait in the daemon, up to max-queued-bytes, then are skipped.
        let hog = try daemon.client()
        try hog.send(Request.line(op: "prefetch", [("what", .string("images")), ("progress", .bool(true))]))
        let finished = waitUntil(120) { (try? daemon.call("status"))?["images_cached"]?.int == 2000 }
        #expect(finished, "the prefetch finished")
        usleep(300_000)
        let after = AbuseTests.rss(daemon.pid)
        #expect(after - before < 24 << 20, "resident memory grew by \(formatSize(Int64(after - before)))")
        // The hog reads at last: its answers, the progress events that were kept, in order, then the summary.
        var events = 0
        var last = -1
        while true {
            let line = try hog.readJSON()
            if line["event"] == .string("progress") {
                events += 1
                let done = line["done"]?.int ?? -1
                #expect(done >= last, "progress never goes backwards")
                last = done
                continue
            }
            #expect(line["images"]?["downloaded"]?.int == 2000, "\(line)")
            break
        }
        #expect(events > 0 && events < 2000, "\(events) progress events: some, not one per row")
    }
}

/// A flag shared between test threads.
final class LockedFlag: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var flag = false
    func set() { lock.lock(); flag = true; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return flag }
}

/// A counter shared between test threads.
final class LockedCounter: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
