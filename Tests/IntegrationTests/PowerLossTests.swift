import Foundation
import Testing
import CacheProtocol
import CacheStore
import CacheSystem

/// Power loss, which kill -9 cannot show: the store lives on lazyfs
/// (Tests/Fixtures/lazyfs), which keeps every byte and directory entry that
/// was not fsynced only until it is told to lose power. Each round starts a
/// daemon on the store, checks what the previous rounds were promised, runs a
/// load, then at a random moment kills the daemon (kill -9, waited for) and
/// only then cuts the power: everything not fsynced is gone, the file system
/// is mounted again with exactly the durable state.
///
/// After each cut the fresh daemon must open the store, keep every write
/// whose answer reached the client (a prefetch's rows, a get_image's row, an
/// acknowledged posts refresh, byte for byte), serve every cached row with
/// its origin bytes and verify with nothing corrupt, without downloading.
///
/// `CACHED_POWERLOSS_ROUNDS` is the number of power losses over the six
/// scenarios (default 12; `make powerloss` runs 120).
@Suite(.serialized) struct PowerLossTests {
    static let totalRounds = Int(ProcessInfo.processInfo.environment["CACHED_POWERLOSS_ROUNDS"] ?? "") ?? 12
    static let rounds = max(1, (totalRounds + 5) / 6)

    @Test func lazyfsKeepsExactlyWhatWasFsynced() throws {
        let binary = try LazyFS.binary()
        let (status, output) = try runProgram("/usr/bin/env", ["python3", LazyFS.selfTest, binary])
        #expect(status == 0, "lazyfs's own test failed:\n\(output)")
    }

    @Test func powerLossDuringPrefetch() throws {
        try Self.powerLossLoop("prefetch") { socket, round, ctx in
            for j in 0..<200 {
                let names = ctx.files.baseImages + (0..<4).map { k in
                    ctx.files.newImage("pf-\(round)-\(j)-\(k).png", size: k == 0 ? Int.random(in: 70_000...160_000) : Int.random(in: 300...6_000))
                }
                ctx.files.writeManifest(names)
                guard let r = try? Client(socketPath: socket).call("prefetch", [("force", .bool(j % 3 == 2))]) else { return }
                ctx.acknowledgePrefetch(r, manifest: names, postsVersion: 0)
            }
        }
    }

    @Test func powerLossDuringReadThrough() throws {
        let count = 240
        try Self.powerLossLoop("read-through", setup: { files in
            let names = (0..<count).map { i in
                files.newImage("rt-\(i).png", size: i % 4 == 0 ? Int.random(in: 65_536...120_000) : Int.random(in: 200...8_000))
            }
            files.writeManifest(names)
        }) { socket, round, ctx in
            let window = (round * 24) % count
            onThreads(6) { _ in
                for _ in 0..<40 {
                    let row = (window + Int.random(in: 0..<36)) % count
                    guard let r = try? Client(socketPath: socket).call("get_image", [("row", num(row))]) else { return }
                    ctx.acknowledgeImage(r)
                }
            }
        }
    }

    @Test func powerLossDuringPostRefresh() throws {
        try Self.powerLossLoop("post refresh") { socket, _, ctx in
            for _ in 0..<200 {
                let version = ctx.files.writePosts()
                ctx.model.withLock { $0.postsAttempted = version }
                guard let r = try? Client(socketPath: socket).call("prefetch", [("what", .string("posts"))]) else { return }
                ctx.acknowledgePrefetch(r, manifest: nil, postsVersion: version)
            }
        }
    }

    @Test func powerLossDuringEviction() throws {
        // 15 KiB holds the two largest images (10,518 + 3,482 bytes): a commit
        // may evict everything but itself and the most recently used object,
        // so the last get_image answered before the cut must still be cached.
        try Self.powerLossLoop("eviction", arguments: ["--max-size", "15K"], eviction: true) { socket, _, ctx in
            guard let c = try? Client(socketPath: socket), (try? c.call("prefetch", [("what", .string("images"))])) != nil else { return }
            for _ in 0..<300 {
                guard let r = try? c.call("get_image", [("row", num(Int.random(in: 0..<16)))]) else { return }
                ctx.acknowledgeImage(r)
            }
        }
    }

    @Test func powerLossDuringGarbageCollection() throws {
        try Self.powerLossLoop("gc") { socket, round, ctx in
            guard let c = try? Client(socketPath: socket) else { return }
            for j in 0..<200 {
                // New rows replace last iteration's: their objects become garbage.
                let names = ctx.files.baseImages + (0..<3).map { k in
                    ctx.files.newImage("gc-\(round)-\(j)-\(k).png", size: Int.random(in: 300...90_000))
                }
                ctx.files.writeManifest(names)
                guard let r = try? c.call("prefetch", [("what", .string("images"))]) else { return }
                ctx.acknowledgePrefetch(r, manifest: names, postsVersion: nil)
                guard (try? c.call("gc")) != nil else { return }
            }
        }
    }

    @Test func powerLossDuringCompaction() throws {
        try Self.powerLossLoop("compaction") { socket, round, ctx in
            guard let c = try? Client(socketPath: socket) else { return }
            var names = ctx.files.baseImages
            if round == 0 {
                ctx.files.writeManifest(names)
                guard let first = try? c.call("prefetch") else { return }
                ctx.acknowledgePrefetch(first, manifest: names, postsVersion: 0)
            }
            // Compaction first: what is acknowledged after it lives only in the new log.
            for j in 0..<200 {
                guard (try? c.call("compact")) != nil else { return }
                let version = ctx.files.writePosts()
                ctx.model.withLock { $0.postsAttempted = version }
                guard let p = try? c.call("prefetch", [("what", .string("posts"))]) else { return }
                ctx.acknowledgePrefetch(p, manifest: nil, postsVersion: version)
                guard let g = try? c.call("get_image", [("row", num(Int.random(in: 0..<names.count)))]) else { return }
                ctx.acknowledgeImage(g)
                if j % 2 == 1 {
                    names = ctx.files.baseImages + (0..<2).map { k in ctx.files.newImage("cp-\(round)-\(j)-\(k).png", size: Int.random(in: 300...80_000)) }
                    ctx.files.writeManifest(names)
                    guard let i = try? c.call("prefetch", [("what", .string("images"))]) else { return }
                    ctx.acknowledgePrefetch(i, manifest: names, postsVersion: nil)
                }
            }
        }
    }

    /// A fan-out directory that exists but whose entry in objects/ was never
    /// fsynced: what a daemon killed between its mkdir and the fsync of
    /// objects/ leaves behind, and what a second commit into the same new
    /// fan-out sees while the first has not fsynced objects/ yet. An object
    /// committed into it must survive a power loss all the same.
    @Test func anObjectInAnUnsyncedFanOutDirectorySurvivesAPowerLoss() throws {
        let origin = try Origin()
        let mount = try LazyMount()
        defer { mount.unmount() }
        let scratch = Scratch()
        let store = mount.mountPoint + "/store"
        var daemon = try Daemon(origin: origin, arguments: ["--store", store], scratch: scratch)
        #expect(try daemon.call("list_images")["ok"] == .bool(true), "the manifest is known and durable")
        #expect(daemon.stop() == 0)
        let expected = try origin.read("images/05-night.png")
        let hex = Hash128(of: expected).hex
        // The state a crash right after mkdir leaves: the directory, never fsynced into objects/.
        try FileManager.default.createDirectory(atPath: store + "/objects/" + hex.prefix(2), withIntermediateDirectories: false)
        daemon = try Daemon(origin: origin, arguments: ["--store", store], scratch: scratch)
        let answer = try daemon.call("get_image", [("row", num(4))])
        #expect(answer["image"]?["hash"]?.string == hex, "\(text(answer))")
        daemon.kill9()
        try mount.powerLoss()
        try mount.mount()
        daemon = try Daemon(origin: origin, arguments: ["--store", store], scratch: scratch)
        let after = try daemon.call("get_image", [("row", num(4)), ("fetch", .bool(false))])
        #expect(after["image"]?["hash"]?.string == hex,
                "row 4 was acknowledged cached in objects/\(hex.prefix(2))/, a fan-out directory that existed but was not durable; after the power loss: \(text(after))")
        let c = try daemon.client()
        try c.send(Request.line(op: "read", [("hash", .string(hex))]))
        let header = try c.readJSON()
        #expect(header["size"]?.int == expected.count, "\(text(header))")
        if header["ok"] == .bool(true) {
            var got: [UInt8] = []
            try c.readBytes(expected.count) { got += $0 }
            #expect(got == expected)
        }
        #expect(daemon.stop() == 0)
    }

    // MARK: The loop

    /// Starts a daemon per round on a store on lazyfs, checks the promises
    /// so far, runs `load` and cuts the power at a random moment.
    static func powerLossLoop(_ name: String, arguments: [String] = [], eviction: Bool = false,
                              setup: (PowerLossOrigin) throws -> Void = { _ in },
                              load: @escaping @Sendable (String, Int, PowerLossContext) -> Void) throws {
        let started = Date()
        let origin = try Origin(delay: 0.01)
        let files = PowerLossOrigin(origin)
        try setup(files)
        let ctx = PowerLossContext(files: files)
        let mount = try LazyMount()
        defer { mount.unmount() }
        let scratch = Scratch()
        // The daemon creates the store directory itself, on the mount.
        let store = mount.mountPoint + "/store"
        var checked = CheckTally()
        let verbose = ProcessInfo.processInfo.environment["CACHED_POWERLOSS_VERBOSE"] != nil
        for round in 0...rounds {
            let t0 = Date()
            let daemon: Daemon
            do {
                daemon = try Daemon(origin: origin, arguments: ["--store", store, "--concurrency", "2"] + arguments, scratch: scratch)
            } catch {
                throw HarnessError("\(name), after power loss \(round): the store does not open: \(error)")
            }
            let t1 = Date()
            try checkPromises(daemon, ctx, store: store, eviction: eviction, what: "\(name), after power loss \(round)", tally: &checked)
            let t2 = Date()
            if round == rounds {
                #expect(try daemon.call("prefetch")["ok"] == .bool(true), "\(name): a prefetch works after the power losses")
                #expect(daemon.stop() == 0)
                break
            }
            ctx.model.withLock { $0.lastImage = nil }
            let socket = daemon.socket
            let finished = DispatchSemaphore(value: 0)
            Thread {
                load(socket, round, ctx)
                finished.signal()
            }.start()
            let delay = useconds_t.random(in: 5_000...1_200_000)
            usleep(delay)
            // The daemon dies first (and is waited for), then the power goes:
            // nothing it could still write reaches the new state.
            daemon.kill9()
            let t3 = Date()
            finished.wait()
            try mount.powerLoss()
            try mount.mount()
            if verbose {
                func ms(_ a: Date, _ b: Date) -> Int { Int(b.timeIntervalSince(a) * 1000) }
                print("\(name) round \(round): start \(ms(t0, t1)) ms, checks \(ms(t1, t2)) ms, cut after \(delay / 1000) ms, " +
                      "load stopped \(ms(t3, Date())) ms later (power loss and mount included)")
            }
        }
        let acks = ctx.model.withLock { $0.acknowledged }
        print("power loss during \(name): \(rounds) power losses, \(acks) acknowledged answers, " +
              "\(checked.rows) acknowledged rows and \(checked.posts) posts versions checked, \(checked.reads) objects read back, " +
              "\(checked.lost) lost, \(checked.wrong) wrong, \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    struct CheckTally {
        var rows = 0, posts = 0, reads = 0, lost = 0, wrong = 0
    }

    /// Everything promised before the cut, on a freshly started daemon.
    static func checkPromises(_ daemon: Daemon, _ ctx: PowerLossContext, store: String, eviction: Bool, what: String,
                              tally: inout CheckTally) throws {
        let model = ctx.model.withLock { $0 }
        #expect(!daemon.log.contains("index.log was damaged"), "\(what): the log was damaged: \(daemon.log)")
        let list = try daemon.call("list_images")
        let images = list["images"]?.array ?? []
        var current: [Int: (url: String, hash: String?)] = [:]
        for i in images {
            current[i["row"]?.int ?? -1] = (i["url"]?.string ?? "", i["hash"]?.string)
        }

        // Every acknowledged row whose URL is still the same is still cached, with the same object.
        let promised: [(Int, PowerLossModel.Ack)] = eviction ? (model.lastImage.map { [$0] } ?? []) : model.rows.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        for (row, ack) in promised {
            guard let now = current[row] else {
                tally.lost += 1
                Issue.record("\(what): row \(row) was acknowledged cached (\(ack.url), \(ack.hash)) and the manifest lost it: \(text(list))")
                continue
            }
            guard now.url == ack.url else { continue }  // a later manifest refresh (durable) changed the row
            tally.rows += 1
            if now.hash != ack.hash {
                tally.lost += 1
                Issue.record("\(what): row \(row) (\(ack.url)) was acknowledged cached as \(ack.hash); now \(now.hash ?? "not cached")")
            }
        }

        // Every cached row serves its origin's bytes.
        for (row, now) in current.sorted(by: { $0.key < $1.key }) {
            guard let hash = now.hash else { continue }
            guard let expected = ctx.files.expected(url: now.url) else {
                Issue.record("\(what): row \(row) has a URL the origin never served: \(now.url)")
                continue
            }
            if Hash128(of: expected).hex != hash {
                tally.wrong += 1
                Issue.record("\(what): row \(row) (\(now.url)) maps to \(hash), not to its bytes' hash \(Hash128(of: expected).hex)")
                continue
            }
            let c = try daemon.client()
            try c.send(Request.line(op: "read", [("hash", .string(hash))]))
            let header = try c.readJSON()
            guard header["ok"] == .bool(true), let size = header["size"]?.int else {
                tally.lost += 1
                Issue.record("\(what): row \(row) is listed cached as \(hash) and read fails: \(text(header))")
                continue
            }
            var got: [UInt8] = []
            try c.readBytes(size) { got += $0 }
            tally.reads += 1
            if got != expected {
                tally.wrong += 1
                Issue.record("\(what): read \(hash) (row \(row)) served \(got.count) bytes that are not the origin's \(expected.count)")
            }
        }

        // Posts: the acknowledged version or a later one attempted, whole.
        let posts = try daemon.call("list_posts")["posts"]?.array ?? []
        if posts.isEmpty {
            #expect(model.postsAcknowledged == nil, "\(what): posts version \(model.postsAcknowledged ?? -1) was acknowledged; no posts now")
            if model.postsAcknowledged != nil { tally.lost += 1 }
        } else {
            let version = PowerLossOrigin.version(of: posts)
            tally.posts += 1
            let low = model.postsAcknowledged ?? 0
            if version < low || version > model.postsAttempted {
                tally.lost += 1
                Issue.record("\(what): posts version \(low) was acknowledged (\(model.postsAttempted) attempted); the store has version \(version)")
            }
            if JSON.array(posts) != ctx.files.posts(version: version) {
                tally.wrong += 1
                Issue.record("\(what): the posts are not exactly version \(version) as the origin served it")
            }
        }

        // Nothing was downloaded to answer the checks (a lost object would be refetched silently).
        let status = try daemon.call("status")
        #expect(status["counters"]?["downloads"]?.int == 0, "\(what): the checks downloaded: \(text(status))")
        let verify = try daemon.call("verify")
        #expect(verify["ok"] == .bool(true) && verify["corrupt"]?.array?.isEmpty == true && verify["repaired"]?.int == 0,
                "\(what): verify found corrupt or missing objects: \(text(verify))")

        // Object files match their names, cached or not; tmp/ was emptied.
        let objects = store + "/objects"
        for fan in (try? FileManager.default.contentsOfDirectory(atPath: objects)) ?? [] {
            for file in (try? FileManager.default.contentsOfDirectory(atPath: objects + "/" + fan)) ?? [] {
                let bytes = FileManager.default.contents(atPath: "\(objects)/\(fan)/\(file)").map { Array($0) } ?? []
                if Hash128(of: bytes).hex != fan + file {
                    tally.wrong += 1
                    Issue.record("\(what): objects/\(fan)/\(file) holds \(bytes.count) bytes that do not match its name")
                }
            }
        }
        // (Post files the start rewrote in the background pass through tmp/.)
        #expect(waitUntil(10) { ((try? FileManager.default.contentsOfDirectory(atPath: store + "/tmp")) ?? []).isEmpty }, "\(what): tmp/ is empty")
    }
}

/// A JSON value as compact text, for messages.
func text(_ json: JSON) -> String { String(decoding: json.encoded, as: UTF8.self) }

/// What the clients were told before a power loss.
struct PowerLossModel {
    struct Ack: Equatable {
        var url: String
        var hash: String
    }
    /// Every row an answer reported cached (the latest answer per row).
    var rows: [Int: Ack] = [:]
    /// The row of the last get_image answered in this round (eviction).
    var lastImage: (Int, Ack)?
    /// The newest posts version a refresh acknowledged; the newest attempted.
    var postsAcknowledged: Int?
    var postsAttempted = 0
    var acknowledged = 0
}

/// The model and the origin's files, shared with the load threads.
final class PowerLossContext: Sendable {
    let model = Locked(PowerLossModel())
    let files: PowerLossOrigin
    let verbose = ProcessInfo.processInfo.environment["CACHED_POWERLOSS_VERBOSE"] != nil

    init(files: PowerLossOrigin) { self.files = files }

    /// A get_image answer: its row is cached with that object.
    func acknowledgeImage(_ answer: JSON) {
        guard answer["ok"] == .bool(true), let image = answer["image"], let row = image["row"]?.int,
              let url = image["url"]?.string, let hash = image["hash"]?.string else { return }
        let ack = PowerLossModel.Ack(url: url, hash: hash)
        model.withLock { m in
            m.rows[row] = ack
            m.lastImage = (row, ack)
            m.acknowledged += 1
        }
    }

    /// A prefetch answer: every row of `manifest` not listed in its failures
    /// is cached with its file's bytes; the posts are `postsVersion`.
    func acknowledgePrefetch(_ answer: JSON, manifest: [String]?, postsVersion: Int?) {
        guard answer["ok"] == .bool(true) else {
            if verbose { print("not acknowledged: \(text(answer))") }
            return
        }
        let failed = Set((answer["failures"]?.array ?? []).compactMap { $0["row"]?.int })
        var acks: [Int: PowerLossModel.Ack] = [:]
        if let manifest, answer["images"].map({ !$0.isNull }) == true {
            for (row, name) in manifest.enumerated() where !failed.contains(row) {
                let url = files.imagesURL + name
                guard let bytes = files.expected(url: url) else { continue }
                acks[row] = PowerLossModel.Ack(url: url, hash: Hash128(of: bytes).hex)
            }
        }
        let posts = answer["posts"].map { !$0.isNull } == true ? postsVersion : nil
        model.withLock { m in
            m.rows.merge(acks) { _, new in new }
            if let posts { m.postsAcknowledged = max(m.postsAcknowledged ?? 0, posts) }
            m.acknowledged += 1
        }
    }
}

/// The origin's files as the loads change them: new images, manifests and
/// posts versions, each file replaced atomically with a modification time
/// later than any before (Last-Modified has one-second resolution).
final class PowerLossOrigin: Sendable {
    let root: String
    let imagesURL: String
    let baseImages: [String]
    private let basePosts: [JSON]
    private let edits = Locked(0)
    private let bytes = Locked<[String: [UInt8]]>([:])

    init(_ origin: Origin) {
        root = origin.root
        imagesURL = origin.base + "/images/"
        let manifest = (try? JSONParser.parse(Array(FileManager.default.contents(atPath: origin.root + "/images/manifest.json") ?? Data()))) ?? .null
        baseImages = (manifest.array ?? []).compactMap { $0["url"]?.string }
        basePosts = ((try? JSONParser.parse(Array(FileManager.default.contents(atPath: origin.root + "/posts.json") ?? Data()))) ?? .null).array ?? []
    }

    private func write(_ relative: String, _ data: [UInt8]) {
        let path = root + "/" + relative
        let n = edits.withLock { e -> Int in e += 1; return e }
        do {
            try Data(data).write(to: URL(fileURLWithPath: path), options: .atomic)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(Double(10 * n))], ofItemAtPath: path)
        } catch {
            FileHandle.standardError.write(Data("cannot write the origin's \(relative): \(error)\n".utf8))
        }
    }

    /// A new image file (PNG signature, then bytes unique to `name`).
    func newImage(_ name: String, size: Int) -> String {
        var data: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(name.utf8)
        if data.count < size, let random = FileHandle(forReadingAtPath: "/dev/urandom") {
            data += Array(random.readData(ofLength: size - data.count))
            random.closeFile()
        }
        write("images/" + name, data)
        bytes.withLock { $0[name] = data }
        return name
    }

    func writeManifest(_ names: [String]) {
        write("images/manifest.json", JSON.array(names.map { .object([("url", .string($0)), ("description", .string("power loss " + $0))]) }).encoded)
    }

    /// The bytes the origin serves for an image URL.
    func expected(url: String) -> [UInt8]? {
        guard url.hasPrefix(imagesURL) else { return nil }
        let name = String(url.dropFirst(imagesURL.count))
        if let b = bytes.withLock({ $0[name] }) { return b }
        guard let data = FileManager.default.contents(atPath: root + "/images/" + name) else { return nil }
        bytes.withLock { $0[name] = Array(data) }
        return Array(data)
    }

    private let postsVersion = Locked(0)

    /// Writes the next posts version; returns its number.
    func writePosts() -> Int {
        let version = postsVersion.withLock { v -> Int in v += 1; return v }
        write("posts.json", posts(version: version).encoded)
        return version
    }

    /// Version 0 is Examples/origin's posts; version N has every title
    /// prefixed with `(vN) ` and one more post, id 1000+N.
    func posts(version: Int) -> JSON {
        guard version > 0 else { return .array(basePosts) }
        var out = basePosts.map { post -> JSON in
            guard case .object(let pairs) = post else { return post }
            return .object(pairs.map { $0.0 == "title" ? ($0.0, .string("(v\(version)) " + ($0.1.string ?? ""))) : $0 })
        }
        out.append(.object([("userId", .number("1")), ("id", .number(String(1000 + version))),
                            ("title", .string("(v\(version)) extra")), ("body", .string("added by version \(version)"))]))
        return .array(out)
    }

    /// Which version a list of posts is (by the first post's title).
    static func version(of posts: [JSON]) -> Int {
        guard let title = posts.first?["title"]?.string, title.hasPrefix("(v"), let close = title.firstIndex(of: ")") else { return 0 }
        return Int(title[title.index(title.startIndex, offsetBy: 2)..<close]) ?? -1
    }
}
