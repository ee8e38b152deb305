import Foundation
import Testing
import CacheProtocol
import CachedClient

/// The Swift library against the real daemon, its origin a real nginx:
/// every operation, pipelining from concurrent tasks over one connection,
/// cancellation that leaves the connection in step, and a daemon restart.
@Suite(.serialized) struct CachedClientTests {
    static func daemon(_ origin: Nginx, _ scratch: Scratch = Scratch(), arguments: [String] = []) throws -> Daemon {
        try Daemon(origin: nil, arguments: ["--posts-url", origin.postsURL, "--images-url", origin.manifestURL] + arguments, scratch: scratch)
    }

    @Test func everyOperationAnswersWithTypedValues() async throws {
        let nginx = try Nginx()
        let d = try Self.daemon(nginx)
        let cached = CachedClient(socketPath: d.socket)
        #expect(try await cached.ping().protocolVersion == 1)
        var progress = 0
        var summary: PrefetchSummary?
        for try await event in cached.prefetch() {
            switch event {
            case .progress: progress += 1
            case .finished(let s): summary = s
            }
        }
        #expect(progress >= 2 && summary?.posts?.fetched == 100 && summary?.images?.downloaded == 16, "\(String(describing: summary))")
        let feed = try JSONParser.parse(try nginx.files!.bytes("posts.json")).array ?? []
        let post = try await cached.post(id: 3)
        #expect(post.id == 3 && post.userID == feed[2]["userId"]?.int && post.title == feed[2]["title"]?.string && post.extra.isEmpty)
        let posts = try await cached.posts()
        #expect(posts.map(\.id) == (1...100).map { PostID.int(Int64($0)) })
        #expect(try await cached.posts(offset: 98).map(\.id) == [.int(99), .int(100)])
        let found = feed.filter { ($0["title"]?.string ?? "").lowercased().contains("qui") }.compactMap { $0["id"]?.int }.sorted()
        #expect(try await cached.posts(query: "QUI").map(\.id) == found.map { PostID.int(Int64($0)) }, "a title search, any case")
        #expect(try await cached.posts(offset: 1, limit: 2, query: "qui").map(\.id) == found[1..<3].map { PostID.int(Int64($0)) })
        let rows = try await cached.images()
        #expect(rows.count == 16 && rows.allSatisfy(\.isCached))
        let file = try nginx.files!.bytes(try nginx.files!.imageFiles()[4])
        #expect(try await cached.imageData(row: 4) == file)
        let opened = try await cached.openImage(row: 4)
        defer { opened.close() }
        var buffer = [UInt8](repeating: 0, count: Int(opened.size))
        #expect(pread(opened.descriptor, &buffer, buffer.count, 0) == file.count && buffer == file)
        #expect(write(opened.descriptor, "x", 1) == -1, "the descriptor is read-only")
        let status = try await cached.status()
        #expect(status.posts == 100 && status.imagesCached == 16 && status.socket == d.socket)
        #expect(try await cached.verify().corrupt.isEmpty)
        _ = try await cached.collectGarbage()
        #expect(try await cached.compact().after > 0)
    }

    /// Issue 26: a variant through the library: the row with its variant,
    /// its verified bytes (sized as asked, read back by `vipsheader`), a
    /// refused size as `badRequest`; and a post of a string-id feed.
    @Test func variantsAndStringIDs() async throws {
        let nginx = try Nginx()
        let d = try Self.daemon(nginx, arguments: ["--variant-max-dimension", "300"])
        let cached = CachedClient(socketPath: d.socket)
        let row = try await cached.image(row: 2, variant: VariantRequest(width: 40, height: 30, fit: .cover, format: .webp))
        let v = try #require(row.variant)
        #expect(v.width == 40 && v.height == 30 && v.type == "image/webp" && row.isCached, "\(row)")
        let bytes = try await cached.variantData(row: 2, VariantRequest(width: 40, height: 30, fit: .cover, format: .webp))
        let h = try VariantTests.header(bytes)
        #expect(h.width == 40 && h.height == 30 && h.loader == "webpload", "\(h)")
        do {
            _ = try await cached.image(row: 2, variant: VariantRequest(width: 301))
            Issue.record("a width over variant-max-dimension was made")
        } catch {
            #expect(error.code == .daemon(.badRequest) && error.message.contains("variant-max-dimension"), "\(error)")
        }
        // A feed of string ids: the library's post(id:) takes the string, and the listing gives each id back.
        try Data(#"[{"id":"a/b c","title":"one"},{"id":"7","title":"two"}]"#.utf8).write(to: URL(fileURLWithPath: nginx.files!.root + "/posts.json"))
        for try await _ in cached.prefetch(.posts) {}
        #expect(try await cached.post(id: "a/b c").title == "one")
        #expect(try await cached.post(id: 7).title == "two", "an integer request finds the string id \"7\"")
        #expect(try await cached.posts().map(\.id) == [.string("a/b c"), .string("7")], "the feed's order: an id is a string")
        // delete_post: the id it was kept by comes back, then it is gone.
        #expect(try await cached.deletePost(id: 7) == .string("7"))
        #expect(try await cached.posts().map(\.id) == [.string("a/b c")])
        do {
            _ = try await cached.deletePost(id: 7)
            Issue.record("a deleted post was deleted again")
        } catch { #expect(error.code == .daemon(.notFound), "\(error)") }
    }

    @Test func errorsCarryTheProtocolsCodes() async throws {
        let nginx = try Nginx()
        let d = try Self.daemon(nginx)
        let cached = CachedClient(socketPath: d.socket)
        await #expect(throws: CachedError.self) { try await cached.post(id: 5) }
        do { _ = try await cached.post(id: 5) } catch { #expect(error.code == .daemon(.notFound), "\(error)") }
        do { _ = try await cached.image(row: 0, fetch: false) } catch { #expect(error.code == .daemon(.notCached), "\(error)") }
        do { _ = try await cached.read(hash: "nothex") } catch { #expect(error.code == .daemon(.badRequest), "\(error)") }
        let nobody = CachedClient(socketPath: d.scratch.path + "/nothing.sock")
        do { _ = try await nobody.ping() } catch { #expect(error.code == .unavailable, "\(error)") }
        #expect(try await cached.ping().protocolVersion == 1, "an error answer leaves the connection usable")
    }

    /// 400 requests from 50 tasks at once over the one connection: each
    /// gets its own answer (the daemon counts one connection).
    @Test func concurrentTasksPipelineOverOneConnection() async throws {
        let nginx = try Nginx()
        let d = try Self.daemon(nginx)
        let cached = CachedClient(socketPath: d.socket)
        for try await _ in cached.prefetch(.posts) {}
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<50 {
                group.addTask {
                    for i in 0..<8 {
                        let id = (t * 8 + i) % 100 + 1
                        let post = try await cached.post(id: .int(Int64(id)))
                        guard post.id == .int(Int64(id)) else { throw HarnessError("asked for \(id), got \(post.id)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let counters = try await cached.status().counters
        #expect(counters["connections"] == 1, "\(counters)")
    }

    /// A task cancelled while its answer is awaited (a download from a slow
    /// origin) returns at once; the answer is read and dropped, and the
    /// next answers still match their requests.
    @Test func cancellingAWaitingTaskKeepsTheConnectionInStep() async throws {
        let slow = try Origin(delay: 1.5)
        let d = try Daemon(origin: slow)
        let cached = CachedClient(socketPath: d.socket, timeout: 30)
        _ = try d.call("prefetch", [("what", .string("posts"))])
        let waiting = Task { try await cached.image(row: 2) }
        try await Task.sleep(nanoseconds: 200_000_000)
        let started = Date()
        waiting.cancel()
        do { _ = try await waiting.value; Issue.record("the cancelled task returned an answer") }
        catch let e as CachedError { #expect(e.code == .cancelled, "\(e)") }
        #expect(Date().timeIntervalSince(started) < 1.0, "cancellation does not wait for the answer")
        // Pipelined behind the cancelled request: these must get their own answers.
        async let a = cached.post(id: 10)
        async let b = cached.post(id: 11)
        let (pa, pb) = try await (a, b)
        #expect(pa.id == 10 && pb.id == 11)
        #expect(try await cached.image(row: 2).isCached, "the cancelled download went on in the daemon")
    }

    /// A task cancelled before its call begins sends nothing: a cancelled
    /// prefetch does not run.
    @Test func aTaskCancelledBeforeItsCallSendsNothing() async throws {
        let nginx = try Nginx()
        let d = try Self.daemon(nginx)
        let cached = CachedClient(socketPath: d.socket)
        let task = Task {
            while !Task.isCancelled { await Task.yield() }
            for try await _ in cached.prefetch(.posts) {}
        }
        task.cancel()
        _ = try? await task.value
        let never = Task { () async throws(CachedError) -> Int in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cached.compact().after
        }
        do { _ = try await never.value; Issue.record("a cancelled compact answered") }
        catch let e as CachedError { #expect(e.code == .cancelled) }
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await cached.status().posts == 0, "the cancelled prefetch did not run")
        #expect(!d.log.contains("compacted"), "the cancelled compact did not run")
    }

    @Test func theClientConnectsAgainAfterTheDaemonRestarts() async throws {
        let nginx = try Nginx()
        let scratch = Scratch()
        var d = try Self.daemon(nginx, scratch)
        let cached = CachedClient(socketPath: d.socket)
        for try await _ in cached.prefetch(.posts) {}
        #expect(try await cached.post(id: 1).id == 1)
        #expect(d.stop() == 0)
        do { _ = try await cached.post(id: 1); Issue.record("no daemon, yet an answer") } catch { #expect(error.code == .unavailable) }
        d = try Self.daemon(nginx, scratch)
        #expect(try await cached.post(id: 2).id == 2, "the next call after the restart connects again")
        _ = d
    }
}
