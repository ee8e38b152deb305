import Testing
import CacheProtocol
import CacheService
import CacheStore

/// The HTTP routes as docs/http.md says, one test each, through the real
/// front-end over a seeded store (`DispatchFixture`).
@Suite struct HTTPRouteTests {
    @Test func theIndexPageIsHTMLWithItsPolicy() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let page = try f.http("/")
        #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.headers["content-security-policy"]?.contains("frame-ancestors 'none'") == true)
        #expect(String(decoding: page.body, as: UTF8.self).contains("<script"))
        let head = try f.http("/", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(page.body.count))
    }

    @Test func postsListPagesAndSearches() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let posts = try f.http("/posts")
        #expect(posts.status == 200 && posts.headers["x-total-count"] == "2" && posts.json?.array?.count == 2)
        let second = try f.http("/posts?offset=1&limit=1&with_ids=1")
        #expect(second.json?.array?.first?["id"] == .number("2"), "\(String(decoding: second.body, as: UTF8.self))")
        #expect(try f.http("/posts?q=one").json?.array?.count == 1)
        #expect(try f.http("/posts?offset=-1").status == 400)
    }

    @Test func onePostIsItsBytes() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let post = try f.http("/posts/1")
        #expect(post.status == 200 && post.body == DispatchFixture.posts[0].1 && post.headers["content-type"]?.hasPrefix("application/json") == true)
        let absent = try f.http("/posts/9")
        #expect(absent.status == 404 && absent.errorCode == "not_found")
    }

    @Test func imagesListEveryRow() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let images = try f.http("/images")
        #expect(images.status == 200 && images.headers["x-total-count"] == "2")
        let rows = try #require(images.json?.array)
        #expect(rows.count == 2 && rows[0]["hash"]?.string == f.hash.hex && rows[1]["hash"] == .null && rows[0]["path"] == nil, "hash null when not cached, no path: \(rows)")
    }

    @Test func anImageIsItsVerifiedBytesWithItsHashAsETag() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let image = try f.http("/images/0")
        #expect(image.status == 200 && image.body == DispatchFixture.png && image.headers["content-type"] == "image/png")
        #expect(image.headers["etag"] == "\"\(f.hash.hex)\"" && image.headers["cache-control"] == "no-cache")
        #expect(image.headers["content-security-policy"] == "sandbox")
        #expect(try f.http("/images/0", headers: "If-None-Match: \"\(f.hash.hex)\"\n").status == 304)
        let notCached = try f.http("/images/1?fetch=0")
        #expect(notCached.status == 404 && notCached.errorCode == "not_cached")
        #expect(try f.http("/images/9").status == 404)
        #expect(try f.http("/images/x").status == 400)
    }

    @Test func anImageServesRanges() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let part = try f.http("/images/0", headers: "Range: bytes=0-3\n")
        #expect(part.status == 206 && part.body == Array(DispatchFixture.png.prefix(4)))
        #expect(part.headers["content-range"] == "bytes 0-3/\(DispatchFixture.png.count)")
        let past = try f.http("/images/0", headers: "Range: bytes=999-\n")
        #expect(past.status == 416 && past.headers["content-range"] == "bytes */\(DispatchFixture.png.count)")
        let stale = try f.http("/images/0", headers: "Range: bytes=0-3\nIf-Range: \"00000000000000000000000000000000\"\n")
        #expect(stale.status == 200 && stale.body == DispatchFixture.png, "If-Range of another ETag: the whole object")
    }

    @Test func aVariantRequestIsCheckedBeforeAnythingIsMade() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        #expect(try f.http("/images/0?w=0").status == 400)
        #expect(try f.http("/images/0?w=32&w=64").status == 400)
        #expect(try f.http("/images/0?fit=stretch").status == 400)
        #expect(try f.http("/images/0?format=gif").status == 400)
    }

    @Test func anObjectIsImmutable() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let object = try f.http("/objects/\(f.hash.hex)")
        #expect(object.status == 200 && object.body == DispatchFixture.png)
        #expect(object.headers["cache-control"] == "public, max-age=31536000, immutable")
        let head = try f.http("/objects/\(f.hash.hex)", method: "HEAD")
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(DispatchFixture.png.count))
        #expect(try f.http("/objects/00000000000000000000000000000000").status == 404)
        #expect(try f.http("/objects/XYZ").status == 400)
    }

    @Test func metricsAreTheExpositionFormat() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let metrics = try f.http("/metrics")
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(metrics.status == 200 && metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        #expect(text.contains("\ncached_posts 2\n") && text.contains("# TYPE "))
    }

    @Test func healthz() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let health = try f.http("/healthz")
        #expect(health.status == 200 && health.json?["ok"] == .bool(true))
    }

    @Test func eventsStreamTheServicesEventsUntilTheClientGoes() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let request = try DispatchFixture.request("GET /events HTTP/1.1\n\(DispatchFixture.host)\n")
        func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }
        var bytes = f.harness.stream(request, connection: 42) { text($0).contains("retry: 2000") }
        #expect(text(bytes).contains("Content-Type: text/event-stream") && text(bytes).contains("Transfer-Encoding: chunked"))
        // An event the service publishes, through the hook the harness sets
        // as `Daemon` does (the daemon's own wiring is held by the
        // integration tests of /events).
        f.harness.service.onEvent?(.prefetchFinished(succeeded: true))
        f.harness.more(bytes: &bytes, connection: 42) { text($0).contains("event: done") }
        #expect(text(bytes).contains("event: done\ndata: {\"ok\":true}\n\n"), "\(text(bytes))")
        // Gone: nothing more is sent to it.
        f.harness.close(stream: 42)
        let before = bytes.count
        f.harness.service.onEvent?(.prefetchFinished(succeeded: false))
        f.harness.more(bytes: &bytes, connection: 42, timeout: .milliseconds(200)) { _ in false }
        #expect(bytes.count == before)
    }

    @Test func unknownPathsAndWrongMethods() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        #expect(try f.http("/nowhere").status == 404)
        #expect(try f.http("/posts/").status == 404, "an empty segment names nothing")
        let post = try f.http("/posts", method: "POST", headers: "Content-Length: 0\n")
        #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD")
        let misdirected = try DispatchFixture.request("GET /posts HTTP/1.1\nHost: evil.example\n\n")
        #expect(try DispatchFixture.parse(try #require(f.harness.answer(misdirected))).status == 421)
    }

    @Test func theAdminRoutesAreOffByDefault() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        for route in ["prefetch", "verify", "gc", "compact"] {
            #expect(try f.http("/\(route)", method: "POST", headers: "Content-Length: 0\n").status == 403, "\(route)")
        }
    }

    static let post = "Content-Length: 0\n"

    @Test func postVerifyChecksEveryObject() throws {
        let f = try DispatchFixture(allowAdmin: true); defer { f.remove() }
        let verify = try f.http("/verify", method: "POST", headers: Self.post)
        #expect(verify.status == 200 && verify.json?["checked"]?.integer == 1, "\(String(decoding: verify.body, as: UTF8.self))")
    }

    @Test func postGcAnswersHowManyItRemoved() throws {
        let f = try DispatchFixture(allowAdmin: true); defer { f.remove() }
        let gc = try f.http("/gc", method: "POST", headers: Self.post)
        #expect(gc.status == 200 && gc.json?["removed"]?.integer == 0, "the fixture's one object is mapped")
    }

    @Test func postCompactAnswersOkAndTheStoreStillServes() throws {
        let f = try DispatchFixture(allowAdmin: true); defer { f.remove() }
        let compact = try f.http("/compact", method: "POST", headers: Self.post)
        #expect(compact.status == 200 && compact.json?["ok"] == .bool(true))
        let verify = try f.http("/verify", method: "POST", headers: Self.post)
        #expect(verify.json?["checked"]?.integer == 1, "the compacted log lost the object")
    }

    @Test func postPrefetchTakesWhatAndSaysWhyItFailed() throws {
        let f = try DispatchFixture(allowAdmin: true); defer { f.remove() }
        let prefetch = try f.http("/prefetch?what=posts", method: "POST", headers: Self.post)
        #expect(prefetch.status == 502 && prefetch.errorCode == "upstream", "no posts-url: \(prefetch.status)")
        #expect(try f.http("/prefetch?what=nothing", method: "POST", headers: Self.post).status == 400)
    }

    @Test func theAdminRoutesArePostsFromThisOriginOnly() throws {
        let f = try DispatchFixture(allowAdmin: true); defer { f.remove() }
        let get = try f.http("/gc")
        #expect(get.status == 405 && get.headers["allow"] == "POST")
        #expect(try f.http("/gc", method: "POST", headers: Self.post + "Origin: http://evil.example\n").status == 403)
        #expect(try f.http("/gc", method: "POST", headers: "Content-Length: 0\nContent-Type: text/plain\n").status == 403)
    }
}
