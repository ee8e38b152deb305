import Foundation
import Testing
import CacheProtocol
import CacheStore
import CacheSystem

/// Every origin fault of docs/operations.md, "Fetching: retries, timeouts, limits", against a real misbehaving server
/// (Tests/Fixtures/fault-origin.py): the error the client sees, how many
/// requests were made, and that the store still serves what it had.
@Suite struct UpstreamFaultTests {
    /// Short timeouts and quick retries, so faults show in a second or two.
    static let fast = ["--retries", "2", "--retry-delay", "0.05", "--timeout", "2", "--stall-timeout", "1", "--connect-timeout", "2"]

    /// An origin whose manifest has extra rows (16, 17, ...) with these URLs.
    static func origin(extraRows: [String]) throws -> Origin {
        let origin = try Origin()
        var manifest = try JSONParser.parse(origin.read("images/manifest.json")).array ?? []
        for url in extraRows { manifest.append(.object([("url", .string(url)), ("description", .string("fault"))])) }
        try origin.write("images/manifest.json", bytes: JSON.array(manifest).encoded)
        return origin
    }

    /// Prefetches everything, then returns the failure of the one extra row.
    static func failureOfRow16(_ daemon: Daemon) throws -> (answer: JSON, error: String) {
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(r["ok"] == .bool(true), "an image failure does not fail the prefetch: \(r)")
        #expect(r["images"]?["downloaded"]?.int == 16, "the good rows are all stored")
        let failures = r["failures"]?.array ?? []
        #expect(failures.map { $0["row"]?.int } == [16], "\(failures)")
        return (r, failures.first?["error"]?.string ?? "")
    }

    static func assertStillServes(_ daemon: Daemon, images: Int = 16) throws {
        #expect(try daemon.call("status")["images_cached"]?.int == images)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/tmp").isEmpty, "no partial file")
        #expect(try daemon.call("verify")["corrupt"] == .array([]))
    }

    @Test func anImageThatHangsPastTheTimeoutFails() throws {
        let path = "/fault/hang/5/images/01-sunrise.png"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--timeout", "0.5"])
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error.contains("timed out"), "\(error)")
        #expect(error.contains("after 3 attempts"), "\(error)")
        #expect(try origin.count(path) == 3, "timeouts are retried")
        try Self.assertStillServes(daemon)
    }

    @Test func aSlowButSteadyBodyIsReceived() throws {
        let path = "/fault/drip/40/600/images/09-plasma.png"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let r = try daemon.call("get_image", [("row", num(16))])
        #expect(r["image"]?["hash"]?.string == Hash128(of: try origin.read("images/09-plasma.png")).hex, "\(r)")
        #expect(try origin.count(path) == 1)
    }

    @Test func aBodyThatStallsIsAbortedAndRetried() throws {
        let path = "/fault/stall/images/09-plasma.png"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error.contains("too slow") || error.contains("timed out"), "\(error)")
        #expect(try origin.count(path) == 3)
        try Self.assertStillServes(daemon)
    }

    @Test(arguments: ["/fault/cut/images/09-plasma.png", "/fault/longer/images/09-plasma.png"])
    func aTruncatedBodyOrWrongContentLengthIsRetriedThenFails(_ path: String) throws {
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error.contains("bytes remaining") || error.contains("closed"), "\(error)")
        #expect(try origin.count(path) == 3)
        try Self.assertStillServes(daemon)
    }

    @Test func aServerErrorThatNeverRecoversFailsAfterTheRetries() throws {
        let path = "/fault/status/502/x.png"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error == "HTTP 502 (after 3 attempts)")
        #expect(try origin.count(path) == 3)
    }

    @Test(arguments: [404, 403, 410])
    func aClientErrorIsNotRetried(_ code: Int) throws {
        let path = "/fault/status/\(code)/x.png"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        // A 403 also says that no credentials were sent (docs/operations.md, "Credentials").
        let expected = code == 403 ? "HTTP 403 Forbidden: no fetch-header is configured for this origin (http://127.0.0.1:\(origin.port))" : "HTTP \(code)"
        #expect(error == expected)
        #expect(try origin.count(path) == 1)
        let row = try daemon.call("get_image", [("row", num(16))])
        #expect(row["error"]?["code"] == .string("upstream"))
        #expect(row["error"]?["message"]?.string?.contains(expected) == true)
    }

    @Test func anHTMLPageWithStatus200IsNotAnImage() throws {
        let path = "/fault/html/photo.jpg"
        let origin = try Self.origin(extraRows: [path])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error == "not an image: declared text/html, bytes look like HTML")
        #expect(try origin.count(path) == 1, "not retried")
        try Self.assertStillServes(daemon)
    }

    @Test func aBodyLargerThanMaxObjectSizeIsAbortedWhileStreaming() throws {
        let big = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 7, count: 9 << 20)
        let origin = try Self.origin(extraRows: ["big.png"])
        try origin.write("images/big.png", bytes: big)
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--max-object-size", "8M"])
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error == "larger than max-object-size 8 MiB")
        #expect(try origin.count("/images/big.png") == 1, "not retried")
        let sent = try origin.requests().filter { $0.path == "/images/big.png" }.map(\.bytes)
        #expect(sent.allSatisfy { $0 < big.count }, "the transfer stopped before the end: \(sent)")
        try Self.assertStillServes(daemon)
    }

    @Test func aBodyWithoutLengthIsCutAtMaxObjectSize() throws {
        let big = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 9, count: 3 << 20)
        let origin = try Self.origin(extraRows: ["/fault/chunked/images/big.png"])
        try origin.write("images/big.png", bytes: big)
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--max-object-size", "1M"])
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error == "larger than max-object-size 1 MiB")
        #expect(try origin.count("/fault/chunked/images/big.png") == 1, "not retried")
        try Self.assertStillServes(daemon)
    }

    @Test func aRedirectLoopStopsAtTheLimit() throws {
        let origin = try Self.origin(extraRows: ["/fault/redirect-loop/0"])
        let daemon = try Daemon(origin: origin, arguments: Self.fast + ["--max-redirects", "4"])
        // The row alone first, with no other transfer in flight: a prefetch's other downloads
        // leave several idle connections in the pool, and a hop may take any of them.
        let row = try daemon.call("get_image", [("row", num(16))])
        #expect(row["error"]?["message"]?.string?.contains("too many redirects (max-redirects 4)") == true, "\(row)")
        let hops = try origin.requests().filter { $0.path.hasPrefix("/fault/redirect-loop/") }
        #expect(hops.count == 5, "the first request and 4 redirects, not retried")
        // cached follows redirects itself (docs/operations.md, "Credentials"), on the connection it has.
        #expect(Set(hops.map(\.port)).count == 1, "one connection for every hop: \(hops.map(\.port))")
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error == "too many redirects (max-redirects 4)")
    }

    @Test(arguments: ["file", "ftp", "gopher"])
    func aRedirectToAnotherSchemeIsNotFollowed(_ scheme: String) throws {
        let origin = try Self.origin(extraRows: ["/fault/redirect/\(scheme)"])
        let daemon = try Daemon(origin: origin, arguments: Self.fast)
        let (_, error) = try Self.failureOfRow16(daemon)
        #expect(error.lowercased().contains("protocol"), "\(error)")
        #expect(error.contains(scheme), "\(error)")
        #expect(try origin.count("/fault/redirect/\(scheme)") == 1)
    }

    @Test(arguments: ["/fault/cut/posts.json", "/fault/status/500/posts.json", "/fault/hang/5/posts.json",
                      "/fault/html/posts.json", "/fault/redirect/file"])
    func aFaultyPostsFeedChangesNothing(_ path: String) throws {
        let origin = try Origin()
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, scratch: scratch)
        _ = try daemon.call("prefetch")
        let posts = try daemon.call("list_posts")
        #expect(daemon.stop() == 0)
        daemon = try Daemon(origin: origin, arguments: Self.fast + ["--timeout", "0.5", "--posts-url", origin.base + path], scratch: scratch)
        let r = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(r["ok"] == .bool(false))
        #expect(r["error"]?["code"] == .string("upstream"))
        #expect(r["error"]?["message"]?.string?.contains(origin.base + path) == true, "the message names the feed: \(r)")
        #expect(try daemon.call("list_posts") == posts, "the previous posts are still served")
    }

    @Test func feedsAreRevalidatedWithETagAndLastModified() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let etagFeed = origin.base + "/etag/posts.json"
        var daemon = try Daemon(origin: origin, arguments: ["--posts-url", etagFeed], scratch: scratch)
        _ = try daemon.call("prefetch")
        #expect(daemon.stop() == 0)
        // Validators are kept in the log: they survive a restart.
        daemon = try Daemon(origin: origin, arguments: ["--posts-url", etagFeed], scratch: scratch)
        let r = try daemon.call("prefetch")
        #expect(r["posts"]?["unchanged"]?.int == 100)
        #expect(r["images"]?["cached"]?.int == 16)
        let log = try origin.requests()
        let posts = log.filter { $0.path == "/etag/posts.json" }
        let manifest = log.filter { $0.path == "/images/manifest.json" }
        #expect(posts.map(\.status) == [200, 304])
        #expect(posts.last?.ifNoneMatch != nil)
        #expect(manifest.map(\.status) == [200, 304])
        #expect(manifest.last?.ifModifiedSince != nil)
        #expect(posts.last?.bytes == 0 && manifest.last?.bytes == 0, "zero bytes of feed bodies the second time")

        let forced = try daemon.call("prefetch", [("force", .bool(true))])
        #expect(forced["ok"] == .bool(true))
        let last = try origin.requests().filter { $0.path == "/etag/posts.json" }.last
        #expect(last?.status == 200)
        #expect(last?.ifNoneMatch == nil, "force sends no validators")
    }

    @Test func connectionsAreReusedWithinAndBetweenPrefetches() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--concurrency", "2"])
        _ = try daemon.call("prefetch")
        _ = try daemon.call("prefetch", [("what", .string("images")), ("force", .bool(true))])
        let log = try origin.requests()
        #expect(log.count == 2 + 16 + 1 + 16)
        let connections = Set(log.map(\.port))
        #expect(connections.count <= 2, "\(log.count) requests over \(connections.count) connections")
    }

    @Test func everyRequestCarriesTheUserAgent() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let agents = Set(try origin.requests().map { $0.userAgent ?? "none" })
        let version = try daemon.call("ping")["version"]?.string ?? "?"
        #expect(agents == ["cached/\(version)"])
    }

    @Test func aClientThatLeavesDoesNotCancelItsPrefetch() throws {
        let origin = try Origin(delay: 0.1)
        let daemon = try Daemon(origin: origin)
        do {
            let c = try daemon.client()
            try c.send(Request.line(op: "prefetch"))
        }  // the connection closes here
        #expect(waitUntil(20) { (try? daemon.call("status")["images_cached"]?.int) == 16 })
        #expect(try daemon.call("status")["posts"]?.int == 100)
        #expect(waitUntil(5) { daemon.log.contains("prefetch all finished") }, "the result is logged")
    }

    @Test func aSecondPrefetchJoinsTheRunningOne() throws {
        let origin = try Origin(delay: 0.1)
        let daemon = try Daemon(origin: origin)
        let socket = daemon.socket
        let answers = Locked<[JSON]>([])
        let events = Locked<[Int]>([])
        onThreads(3) { _ in
            guard let c = try? Client(socketPath: socket) else { return }
            try? c.send(Request.line(op: "prefetch", [("progress", .bool(true))]))
            var count = 0
            while let line = try? c.readJSON() {
                if line["event"] != nil { count += 1; continue }
                answers.withLock { $0.append(line) }
                break
            }
            events.withLock { $0.append(count) }
        }
        let all = answers.withLock { $0 }
        #expect(all.count == 3)
        #expect(Set(all.map { String(decoding: $0.encoded, as: UTF8.self) }).count == 1, "one prefetch, one answer: \(all)")
        #expect(all.first?["images"]?["downloaded"]?.int == 16)
        #expect(try origin.count("/posts.json") == 1)
        #expect(try origin.count("/images/manifest.json") == 1)
        #expect(try origin.count("/images/01-sunrise.png") == 1)
        #expect(daemon.log.components(separatedBy: "joined the one already running").count - 1 == 2)
        #expect(events.withLock { $0 }.allSatisfy { $0 > 0 }, "joiners get progress events too")
    }
}
