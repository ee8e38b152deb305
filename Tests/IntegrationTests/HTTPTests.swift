import Foundation
import Testing
import CacheProtocol

/// The HTTP front-end with real clients: curl, Python's urllib, and nginx as
/// a reverse proxy in front of the Unix-socket listener (docs/http.md).
/// Each daemon's origin is a real nginx.
@Suite(.serialized) struct HTTPTests {
    @Test func curlGetsPostsImagesAndObjectsAsTheSocketGivesThem() throws {
        let f = try HTTPFixture()
        let posts = try f.curl([f.base + "/posts"])
        try #require(posts.status == 0, "\(posts.stderr)")
        let listed = try f.daemon.call("list_posts")
        #expect(try JSONParser.parse(posts.body) == listed["posts"], "GET /posts is list_posts's array")
        #expect(posts.heads.contains("Content-Type: application/json") && posts.heads.contains("X-Total-Count: 100"), "\(posts.heads)")
        let one = try f.curl([f.base + "/posts/7"])
        let stored = try f.daemon.client().call("get_post", [("id", num(7))])["post"]
        #expect(try JSONParser.parse(one.body) == stored, "GET /posts/7 is the stored post")
        #expect(one.heads.contains("Content-Length: \(one.body.count)\r\n"), "\(one.heads)")

        let images = try f.curl([f.base + "/images"])
        // Without `path` (http-show-paths), GET /images is list_images's rows.
        let rowsListed = try f.daemon.call("list_images")["images"]?.array?.map { row -> JSON in
            guard case .object(let fields) = row else { return row }
            return .object(fields.filter { $0.0 != "path" })
        }
        #expect(try JSONParser.parse(images.body).array == rowsListed, "GET /images is list_images's rows, without path")
        let rows = try JSONParser.parse(images.body).array ?? []
        try #require(rows.count == 16)
        for (i, file) in try f.nginx.files!.imageFiles().enumerated() {
            let image = try f.curl([f.base + "/images/\(i)"])
            #expect(try image.body == (f.nginx.files!.bytes(file)), "row \(i): the origin's bytes")
            let hash = rows[i]["hash"]?.string ?? ""
            #expect(image.heads.contains("ETag: \"\(hash)\"") && image.heads.contains("Content-Type: \(rows[i]["type"]?.string ?? "?")"),
                    "row \(i): \(image.heads)")
            let object = try f.curl([f.base + "/objects/\(hash)"])
            #expect(object.body == image.body)
            #expect(object.heads.contains("Cache-Control: public, max-age=31536000, immutable"), "\(object.heads)")
        }
        // And over the Unix socket, as the README shows.
        let viaSocket = try f.curl(["--unix-socket", f.httpSocket, "http://localhost/posts/7"])
        #expect(viaSocket.body == one.body)
    }

    @Test func curlRangesConditionalRequestsAndHead() throws {
        let f = try HTTPFixture()
        let file = try f.nginx.files!.bytes(try f.nginx.files!.imageFiles()[0])
        let url = f.base + "/images/0"
        let whole = try f.curl([url])
        let etag = whole.heads.split(separator: "\r\n").first { $0.hasPrefix("ETag: ") }.map { String($0.dropFirst(6)) } ?? ""
        #expect(etag.count == 34, "\(whole.heads)")

        let part = try f.curl(["-r", "0-9", url])
        #expect(part.heads.hasPrefix("HTTP/1.1 206 ") && part.heads.contains("Content-Range: bytes 0-9/\(file.count)"), "\(part.heads)")
        #expect(part.body == Array(file[0..<10]))
        let tail = try f.curl(["-r", "-4", url])
        #expect(tail.body == Array(file.suffix(4)) && tail.heads.contains("Content-Range: bytes \(file.count - 4)-\(file.count - 1)/\(file.count)"))
        let from = try f.curl(["-r", "100-", url])
        #expect(from.body == Array(file[100...]))
        let past = try f.curl(["-r", "\(file.count)-", url])
        #expect(past.heads.hasPrefix("HTTP/1.1 416 ") && past.heads.contains("Content-Range: bytes */\(file.count)"), "\(past.heads)")
        let several = try f.curl(["-r", "0-1,4-5", url])
        #expect(several.heads.hasPrefix("HTTP/1.1 200 ") && several.body == file, "several ranges: the whole")
        let staleIfRange = try f.curl(["-r", "0-1", "-H", "If-Range: \"0000\"", url])
        #expect(staleIfRange.heads.hasPrefix("HTTP/1.1 200 ") && staleIfRange.body == file, "If-Range that does not match: the whole")

        let conditional = try f.curl(["-H", "If-None-Match: \(etag)", url])
        #expect(conditional.heads.hasPrefix("HTTP/1.1 304 ") && conditional.body.isEmpty && conditional.heads.contains("ETag: \(etag)"),
                "\(conditional.heads)")
        let other = try f.curl(["-H", "If-None-Match: \"nope\"", url])
        #expect(other.heads.hasPrefix("HTTP/1.1 200 ") && other.body == file)

        // curl -I writes the head as its output: nothing may follow it.
        let head = try f.curl(["-I", url])
        #expect(head.heads.hasPrefix("HTTP/1.1 200 ") && head.heads.contains("Content-Length: \(file.count)\r\n") && head.body == Array(head.heads.utf8),
                "\(head.heads)")
        let headPost = try f.curl(["-I", f.base + "/posts/1"])
        #expect(headPost.heads.contains("Content-Length: ") && headPost.body == Array(headPost.heads.utf8))
    }

    @Test func curlKeepsTheConnectionAliveAndHonoursClose() throws {
        let f = try HTTPFixture()
        let two = try f.curl(["-v", f.base + "/posts/1", f.base + "/images/0", f.base + "/healthz"])
        #expect(two.stderr.contains("Re-using existing connection") || two.stderr.contains("Reusing existing connection"),
                "one connection for three requests:\n\(two.stderr)")
        #expect(!two.stderr.contains("Closing connection") || two.stderr.components(separatedBy: "Connected to").count == 2, "\(two.stderr)")
        let close = try f.curl(["-v", "-H", "Connection: close", f.base + "/posts/1", f.base + "/posts/2"])
        #expect(close.stderr.components(separatedBy: "Connected to").count == 3, "Connection: close: a new connection each\n\(close.stderr)")
        let old = try f.curl(["-v", "-0", f.base + "/posts/1", f.base + "/posts/2"])
        #expect(old.stderr.components(separatedBy: "Connected to").count == 3, "HTTP/1.0 without keep-alive closes\n\(old.stderr)")
        #expect(old.heads.contains("HTTP/1.1 200 "))
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let f = try HTTPFixture()
        let c = try RawHTTP(path: f.httpSocket)
        // A hit, a file, an error, a listing and a HEAD, in one write.
        try c.send(httpGet("/posts/3") + httpGet("/images/1") + httpGet("/posts/999") + httpGet("/images") + httpGet("/posts/4", method: "HEAD"))
        let a = try c.response(), b = try c.response(), e = try c.response(), l = try c.response(), h = try c.response(head: true)
        #expect(try a.status == 200 && (JSONParser.parse(a.body))["id"]?.int == 3)
        #expect(try b.status == 200 && b.body == (f.nginx.files!.bytes(f.nginx.files!.imageFiles()[1])))
        #expect(e.status == 404 && e.errorCode == "not_found", "\(e.text)")
        #expect(try l.status == 200 && (JSONParser.parse(l.body)).array?.count == 16)
        #expect(h.status == 200 && Int(h.header("content-length") ?? "") ?? 0 > 0 && h.body.isEmpty)
        // A request body is read and skipped; the next request is served.
        try c.send("POST /posts/1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello" + httpGet("/posts/5"))
        let refused = try c.response(), next = try c.response()
        #expect(refused.status == 405 && refused.header("allow") == "GET, HEAD", "\(refused.headers)")
        #expect(try next.status == 200 && (JSONParser.parse(next.body))["id"]?.int == 5)
    }

    @Test func pythonUrllibReadsEveryRoute() throws {
        let f = try HTTPFixture()
        let hash = try f.daemon.call("get_image", [("row", num(2))])["image"]?["hash"]?.string ?? ""
        let script = """
        import json, sys, urllib.request, urllib.error
        base = sys.argv[1]
        def get(path, headers={}):
            return urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=20)
        posts = json.load(get("/posts"))
        assert [p["id"] for p in posts] == list(range(1, 101)), "ascending ids"
        assert json.load(get("/posts/42"))["id"] == 42
        r = get("/images/2")
        body = r.read()
        assert r.headers["ETag"] == '"%s"' % sys.argv[2] and int(r.headers["Content-Length"]) == len(body)
        r = get("/images/2", {"Range": "bytes=1-3"})
        assert r.status == 206 and r.read() == body[1:4]
        assert get("/objects/" + sys.argv[2]).read() == body
        assert json.load(get("/healthz"))["ok"] is True
        assert b"cached_posts 100" in get("/metrics").read()
        for path, code in [("/posts/0", 404), ("/nope", 404), ("/posts/x", 404), ("/posts/" + "x" * 1025, 400), ("/images/99", 404), ("/objects/zz", 400)]:
            try:
                get(path)
                raise SystemExit("%s: no error" % path)
            except urllib.error.HTTPError as e:
                assert e.code == code, (path, e.code)
                assert json.load(e)["ok"] is False
        try:
            get("/images/2", {"If-None-Match": '"%s"' % sys.argv[2]})
            raise SystemExit("no 304")
        except urllib.error.HTTPError as e:
            assert e.code == 304
        print("urllib: all routes ok")
        """
        let scratch = Scratch()
        try script.write(toFile: scratch.path + "/client.py", atomically: true, encoding: .utf8)
        let r = try runProgram("/usr/bin/python3", [scratch.path + "/client.py", f.base, hash])
        #expect(r.status == 0 && r.output.contains("urllib: all routes ok"), "\(r.output)")
    }

    @Test func nginxProxiesTheUnixSocketListener() throws {
        let f = try HTTPFixture()
        let proxy = try Nginx(proxyingUnixSocket: f.httpSocket)
        let base = "http://127.0.0.1:\(proxy.port)"
        let file = try f.nginx.files!.bytes(try f.nginx.files!.imageFiles()[3])
        let post = try f.curl([base + "/posts/9"])
        #expect(try post.heads.hasPrefix("HTTP/1.1 200 ") && (JSONParser.parse(post.body))["id"]?.int == 9, "\(post.heads)\(post.stderr)")
        let image = try f.curl([base + "/images/3"])
        #expect(image.body == file, "\(image.heads)")
        let part = try f.curl(["-r", "2-5", base + "/images/3"])
        #expect(part.heads.hasPrefix("HTTP/1.1 206 ") && part.body == Array(file[2...5]), "\(part.heads)")
        let etag = image.heads.split(separator: "\r\n").first { $0.hasPrefix("ETag: ") }.map { String($0.dropFirst(6)) } ?? ""
        let conditional = try f.curl(["-H", "If-None-Match: \(etag)", base + "/images/3"])
        #expect(conditional.heads.hasPrefix("HTTP/1.1 304 "), "\(conditional.heads)")
        let missing = try f.curl([base + "/posts/1000"])
        #expect(try missing.heads.hasPrefix("HTTP/1.1 404 ") && (JSONParser.parse(missing.body))["error"]?["code"] == .string("not_found"))
        // Many requests over nginx's kept-alive upstream connections.
        for i in 1...50 {
            let r = try f.curl([base + "/posts/\(i)"])
            #expect(try (JSONParser.parse(r.body))["id"]?.int == i)
        }
        let log = (try? String(contentsOfFile: proxy.scratch.path + "/error.log", encoding: .utf8)) ?? ""
        #expect(!log.contains("upstream prematurely closed") && !log.contains("[error]"), "\(log.suffix(2000))")
    }

    /// docs/http.md, "Headers": what every answer, the page and objects carry.
    @Test func everyAnswerCarriesTheDocumentedHeaders() throws {
        let f = try HTTPFixture()
        let hash = try f.daemon.call("get_image", [("row", num(1))])["image"]?["hash"]?.string ?? ""
        let c = try RawHTTP(path: f.httpSocket)
        try c.send(httpGet("/") + httpGet("/posts/1") + httpGet("/nothing") + httpGet("/objects/" + hash)
                   + httpGet("/images/1", ["If-None-Match: \"\(hash)\""]))
        let page = try c.response(), post = try c.response(), missing = try c.response(), object = try c.response()
        let notModified = try c.response()
        for r in [page, post, missing, object, notModified] {
            #expect(r.header("x-content-type-options") == "nosniff" && r.header("server")?.hasPrefix("cached/") == true
                    && r.header("date")?.hasSuffix(" GMT") == true, "\(r.status) \(r.headers)")
        }
        #expect(page.header("content-type") == "text/html; charset=utf-8")
        #expect(page.header("content-security-policy")?.contains("frame-ancestors 'none'") == true, "\(page.headers)")
        #expect(object.header("content-security-policy") == "sandbox" && object.header("accept-ranges") == "bytes")
        #expect(notModified.status == 304 && notModified.header("etag") == "\"\(hash)\"" && notModified.header("cache-control") == "no-cache")
        // HTTP/1.0 gets the stream unchunked, and Connection: close.
        let old = try RawHTTP(path: f.httpSocket)
        try old.send("GET /events HTTP/1.0\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n")
        let stream = try old.response(head: true)
        #expect(stream.header("connection") == "close" && stream.header("transfer-encoding") == nil, "\(stream.headers)")
    }

    @Test func eventsStreamAPrefetchAsItRuns() throws {
        let f = try HTTPFixture(prefetch: false)
        _ = try cachectl(["prefetch", "posts"], socket: f.daemon.socket)
        let c = try RawHTTP(path: f.httpSocket, timeout: 30)
        try c.send(httpGet("/events"))
        let head = try c.response(head: true)
        #expect(head.status == 200 && head.header("content-type") == "text/event-stream" && head.header("transfer-encoding") == "chunked",
                "\(head.headers)")
        #expect(c.chunk().map { String(decoding: $0, as: UTF8.self) } == "retry: 2000\n\n")
        let prefetch = try cachectl(["prefetch", "images"], socket: f.daemon.socket)
        #expect(prefetch.status == 0, "\(prefetch.stderr)")
        var rows = Set<Int>(), progress = 0, done = false
        while !done, let chunk = c.chunk() {
            let text = String(decoding: chunk, as: UTF8.self)
            let lines = text.split(separator: "\n")
            guard lines.count == 2, lines[0].hasPrefix("event: "), lines[1].hasPrefix("data: ") else { continue }
            let data = try JSONParser.parse(Array(lines[1].dropFirst(6).utf8))
            switch lines[0].dropFirst(7) {
            case "row":
                rows.insert(Int(data["row"]?.int ?? -1))
                #expect(data["hash"]?.string?.count == 32 && data["type"]?.string?.hasPrefix("image/") == true, "\(text)")
            case "progress": progress += 1
            case "done": done = data["ok"] == .bool(true)
            default: Issue.record("an unknown event: \(text)")
            }
        }
        #expect(done, "the stream said the prefetch finished")
        #expect(rows == Set(0..<16), "every row arrived as an event: \(rows.sorted())")
        #expect(progress >= 2)
    }
}
