import Foundation
import Testing
import CacheProtocol
import CacheStore
import CacheSystem

/// Really kill -9 the daemon at random moments and check, after each restart,
/// the store's promises: it opens and answers, everything reported cached is
/// still cached, every object file matches its name, no temp file survives.
/// `CACHED_CRASH_ROUNDS` sets the rounds per scenario (`make crash` raises it).
@Suite struct CrashTests {
    static let rounds = Int(ProcessInfo.processInfo.environment["CACHED_CRASH_ROUNDS"] ?? "") ?? 14

    /// Checks the invariants on a freshly started daemon.
    static func checkInvariants(_ daemon: Daemon, cached: Set<Int>, round: Int) throws {
        #expect(try daemon.call("ping")["ok"] == .bool(true), "round \(round): the daemon answers")
        for row in cached.sorted() {
            let r = try daemon.call("get_image", [("row", num(row)), ("fetch", .bool(false))])
            #expect(r["ok"] == .bool(true), "round \(round): row \(row) was reported cached: \(r)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty, "round \(round): tmp/ is empty")
        for hex in try daemon.objectFiles() {
            let path = daemon.store + "/objects/" + hex.prefix(2) + "/" + hex.dropFirst(2)
            #expect(Hash128Hex.of(path) == hex, "round \(round): object \(hex) does not match its name")
        }
        let posts = try daemon.call("list_posts")
        for p in posts["posts"]?.array ?? [] {
            let id = p["id"]?.int ?? -1
            let file = try? Data(contentsOf: URL(fileURLWithPath: daemon.store + "/posts/\(id).json"))
            #expect(file.map { try? JSONParser.parse(Array($0)) } == .some(p), "round \(round): posts/\(id).json matches the index")
        }
    }

    /// Rows the daemon says are cached right now.
    static func cachedRows(_ daemon: Daemon) -> Set<Int> {
        guard let list = try? daemon.call("list_images")["images"]?.array else { return [] }
        return Set(list.filter { $0["hash"] != nil && $0["hash"] != .null }.compactMap { $0["row"]?.integer.map(Int.init) })
    }

    /// Starts the daemon for each round, lets `load` run, kills it after a
    /// random delay, and checks the invariants at the next start.
    static func crashLoop(origin: Origin, arguments: [String] = [], keepCached: Bool = true,
                          load: @escaping @Sendable (String, Int) -> Void) throws {
        let scratch = Scratch()
        var cached: Set<Int> = []
        for round in 0..<rounds {
            let daemon = try Daemon(origin: origin, arguments: arguments + ["--concurrency", "2"], scratch: scratch)
            try checkInvariants(daemon, cached: keepCached ? cached : [], round: round)
            let socket = daemon.socket
            let worker = Thread { load(socket, round) }
            worker.start()
            usleep(useconds_t.random(in: 2_000...300_000))
            // Whatever a finished answer reported as cached must survive the crash.
            if keepCached { cached.formUnion(cachedRows(daemon)) }
            daemon.kill9()
        }
        let daemon = try Daemon(origin: origin, scratch: scratch)
        try checkInvariants(daemon, cached: keepCached ? cached : [], round: rounds)
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(true), "after the crashes a prefetch works: \(r)")
    }

    @Test func killedDuringPrefetch() throws {
        let origin = try Origin(delay: 0.03)
        try Self.crashLoop(origin: origin) { socket, round in
            _ = try? Client(socketPath: socket).call("prefetch", [("force", .bool(round % 3 == 2))])
        }
    }

    @Test func killedDuringReadThrough() throws {
        let origin = try Origin(delay: 0.03)
        try Self.crashLoop(origin: origin) { socket, round in
            onThreads(6) { i in
                _ = try? Client(socketPath: socket).call("get_image", [("row", num((round * 7 + i * 3) % 16))])
            }
        }
    }

    @Test func killedDuringEviction() throws {
        let origin = try Origin(delay: 0.01)
        // A cap smaller than the images: every commit evicts. Evicted rows are
        // legitimately uncached, so only integrity is checked here.
        try Self.crashLoop(origin: origin, arguments: ["--max-size", "12K"], keepCached: false) { socket, _ in
            _ = try? Client(socketPath: socket).call("prefetch", [("what", .string("images"))])
            for row in 0..<16 { _ = try? Client(socketPath: socket).call("get_image", [("row", num(row))]) }
        }
    }

    @Test func killedDuringGarbageCollectionAndCompaction() throws {
        let origin = try Origin()
        try Self.crashLoop(origin: origin) { socket, round in
            guard let c = try? Client(socketPath: socket) else { return }
            _ = try? c.call("prefetch")
            for _ in 0..<50 {
                _ = try? c.call("compact")
                _ = try? c.call("gc")
                _ = try? c.call("prefetch", [("what", .string("posts")), ("force", .bool(true))])
            }
        }
    }
}

/// A damaged log, given to the real daemon.
@Suite struct DamagedLogTests {
    /// A store filled by real prefetches (compacted, then more transactions), then stopped.
    static func filledStore() throws -> (Scratch, Origin, [UInt8]) {
        let origin = try Origin()
        let scratch = Scratch()
        let daemon = try Daemon(origin: origin, scratch: scratch)
        _ = try daemon.call("prefetch")
        _ = try daemon.call("compact")
        _ = try daemon.call("prefetch", [("what", .string("images")), ("force", .bool(true))])
        for row in 0..<16 { _ = try daemon.call("get_image", [("row", num(row))]) }
        #expect(daemon.stop() == 0)
        return (scratch, origin, Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/store/index.log"))))
    }

    /// What replaying `bytes` keeps: the valid length, the post count and the cached rows.
    static func expected(_ bytes: [UInt8]) -> (length: Int, posts: Int, cachedRows: Int) {
        var posts = Set<PostID>()
        var rows: [Int: Hash128] = [:]
        let outcome = LogScanner.scan(bytes) { transaction in
            for r in transaction {
                switch r {
                case .post(let id, _): posts.insert(id)
                case .postRemoved(let id): posts.remove(id)
                case let .rowObject(row, hash, _, _): rows[row] = hash
                case .objectRemoved(let hash): rows = rows.filter { $0.value != hash }
                default: break
                }
            }
        }
        return (outcome.validLength, posts.count, rows.count)
    }

    @Test func tornTailsAtManyOffsetsKeepEveryCommittedRecordBeforeTheCut() throws {
        let (scratch, origin, log) = try Self.filledStore()
        origin.stop()
        let path = scratch.path + "/store/index.log"
        // Cut inside the last 600 bytes (the last transactions), every 5th offset.
        for cut in stride(from: log.count - 1, to: max(8, log.count - 600), by: -5) {
            let torn = Array(log[0..<cut])
            let want = Self.expected(torn)
            try Data(torn).write(to: URL(fileURLWithPath: path))
            let daemon = try Daemon(origin: origin, scratch: scratch)
            let status = try daemon.call("status")
            #expect(status["posts"]?.int == want.posts, "cut at \(cut)")
            #expect(status["images_cached"]?.int == want.cachedRows, "cut at \(cut)")
            #expect(daemon.stop() == 0)
            let kept = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(kept == Array(log[0..<want.length]), "cut at \(cut): exactly the committed prefix is kept")
            let saved = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/store").filter { $0.hasPrefix("index.log.corrupt-") }
            if want.length < cut {
                #expect(daemon.log.contains("index.log was damaged"), "cut at \(cut): the cut is logged")
                #expect(daemon.log.contains("from offset \(want.length)"), "cut at \(cut): with its offset")
                #expect(saved.count == 1, "cut at \(cut): the damaged bytes are kept aside")
                if let name = saved.first {
                    #expect(Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/store/" + name))) == Array(torn[want.length...]))
                }
            }
            for name in saved { try FileManager.default.removeItem(atPath: scratch.path + "/store/" + name) }
        }
    }

    @Test func randomBytesAppendedAreCutAndKept() throws {
        let (scratch, origin, log) = try Self.filledStore()
        origin.stop()
        let garbage = (0..<4096).map { _ in UInt8.random(in: 0...255) }
        try Data(log + garbage).write(to: URL(fileURLWithPath: scratch.path + "/store/index.log"))
        let daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("status")["posts"]?.int == 100)
        let saved = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/store").filter { $0.hasPrefix("index.log.corrupt-") }
        #expect(saved.count == 1)
        let kept = Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/store/" + saved[0])))
        #expect(kept == garbage)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/store/index.log"))) == log)
    }

    @Test func aCorruptMiddleKeepsEveryRecordBeforeIt() throws {
        let (scratch, origin, log) = try Self.filledStore()
        var damaged = log
        damaged[damaged.count * 3 / 4] ^= 0xFF  // inside the second chunk of posts
        let want = Self.expected(damaged)
        try Data(damaged).write(to: URL(fileURLWithPath: scratch.path + "/store/index.log"))
        let daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("status")["posts"]?.int == want.posts)
        #expect(want.posts > 0, "a compacted log keeps what precedes the damage")
        let kept = Array(try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/store/index.log")))
        #expect(kept == Array(log[0..<want.length]), "the good prefix is kept byte for byte")
        // What the cut lost comes back from the origin.
        #expect(try daemon.call("prefetch")["ok"] == .bool(true))
        #expect(try daemon.call("status")["images_cached"]?.int == 16)
    }

    @Test func objectsWhoseFilesVanishedAreDroppedAtStartAndFetchedOnDemand() throws {
        let origin = try Origin()
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, scratch: scratch)
        let (image, path) = try daemon.prefetchedImage(row: 4)
        #expect(daemon.stop() == 0)
        try FileManager.default.removeItem(atPath: path)
        daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(waitUntil(10) { (try? daemon.call("status")["images_cached"]?.int) == 15 }, "dropped without any request")
        #expect(daemon.log.contains("1 objects named in the index had no file"))
        let again = try daemon.call("get_image", [("row", num(4))])
        #expect(again["image"]?["hash"] == image["hash"])
        #expect(try origin.count("/images/05-night.png") == 2)
    }

    @Test func useTimesReachTheLogAtShutdown() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let daemon = try Daemon(origin: origin, scratch: scratch)
        let (image, _) = try daemon.prefetchedImage(row: 2)
        let hash = try #require(Hash128(hex: image["hash"]?.string ?? ""))
        #expect(daemon.stop() == 0)
        var times: [Int64] = []
        _ = LogScanner.scan(Array(try Data(contentsOf: URL(fileURLWithPath: daemon.store + "/index.log")))) { t in
            for r in t { if case let .access(h, time) = r, h == hash { times.append(time) } }
        }
        // One when the download was committed, one for the get_image, written at shutdown
        // (the once-a-minute writer never ran in this short test).
        #expect(times.count == 2, "\(times)")
        #expect(times.sorted() == times)
    }

    @Test func aReadOfACorruptObjectServesGoodBytesAfterRefetching() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let (image, path) = try daemon.prefetchedImage(row: 9)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let good = bytes
        bytes[bytes.count - 1] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let c = try daemon.client()
        try c.send(Request.line(op: "read", [("hash", image["hash"]!)]))
        let header = try c.readJSON()
        #expect(header["size"]?.int == good.count, "\(header)")
        var got: [UInt8] = []
        try c.readBytes(good.count) { got += $0 }
        #expect(got == good, "never the flipped bytes")
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine").count == 1)
        #expect(try daemon.call("status")["counters"]?["quarantined"]?.int == 1)
        #expect(try origin.count("/images/10-rings.png") == 2)
    }
}
