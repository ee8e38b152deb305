import Foundation
import Testing
import CacheProtocol

/// Bad input, limits, admin routes and socket activation of the HTTP
/// front-end, over raw sockets (what no well-behaved client sends).
@Suite(.serialized) struct HTTPAbuseTests {
    /// Each kind of bad request gets its status and a JSON error body, the
    /// connection is closed, and the daemon goes on serving.
    @Test func malformedRequestsGetAStatusAJSONBodyAndAClose() throws {
        let f = try HTTPFixture()
        let cases: [(String, Int)] = [
            ("GET /posts%2F1 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /objects/..%2f..%2fetc HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /objects/../posts HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /posts/%2e%2e/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /posts/1%00 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /posts/1 HTTP/1.1\r\n\r\n", 400),
            ("GET /posts/1 HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400),
            ("GET /posts/1 HTTP/1.1\r\nHost: a\r\n continued\r\n\r\n", 400),
            ("GET /posts/1 HTTP/3.0\r\nHost: a\r\n\r\n", 505),
            ("POST /gc HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
            ("POST /gc HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n", 413),
            ("GET /" + String(repeating: "p", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
            ("GET /posts/1 HTTP/1.1\r\nHost: a\r\nX-Big: " + String(repeating: "h", count: 20000) + "\r\n\r\n", 431),
            ("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}\r\n\r\n", 400),  // a TLS hello
        ]
        for (text, status) in cases {
            let c = try RawHTTP(path: f.httpSocket)
            try c.send(text)
            let r = try c.response()
            #expect(r.status == status, "\(text.prefix(80).debugDescription): \(r.status) \(r.text)")
            let body = try? JSONParser.parse(r.body)
            #expect(body?["ok"] == .bool(false) && body?["error"]?["message"]?.string?.isEmpty == false, "\(r.text)")
            #expect(r.header("connection") == "close" && c.closesConnection(), "closed after \(status)")
        }
        // Well-formed requests the front-end has no answer for.
        let c = try RawHTTP(path: f.httpSocket)
        try c.send(httpGet("/posts/1/extra") + httpGet("/nothing") + httpGet("/posts", method: "PUT") + httpGet("/posts/abc")
                   + httpGet("/posts/99999") + httpGet("/objects/XYZ") + httpGet("/images/-1") + httpGet("/images/0?fetch=maybe")
                   + httpGet("/posts?limit=x") + httpGet("/posts/") + httpGet("/posts/%2e%2e") + httpGet("/posts/..%2f..%2fetc"))
        // `/posts/abc`, `/posts/%2e%2e` and `/posts/..%2f..%2fetc` are string
        // ids (docs/http.md), looked up in memory: not found, not refused.
        let expected = [404, 404, 405, 404, 404, 400, 400, 400, 400, 404, 404, 404]
        for status in expected {
            let r = try c.response()
            #expect(r.status == status, "\(r.status) \(r.text)")
            #expect(r.header("content-type") == "application/json")
        }
        // Nothing was lost: the store still serves every post.
        let all = try f.curl([f.base + "/posts"])
        #expect(try JSONParser.parse(all.body).array?.count == 100)
        #expect(try f.daemon.call("verify")["corrupt"] == .array([]))
    }

    @Test func aRowNotCachedIs404WithoutFetchAndIsFetchedOtherwise() throws {
        let f = try HTTPFixture(prefetch: false)
        _ = try cachectl(["prefetch", "posts"], socket: f.daemon.socket)
        let c = try RawHTTP(path: f.httpSocket)
        try c.send(httpGet("/images/5?fetch=0"))
        let miss = try c.response()
        #expect(miss.status == 404 && miss.errorCode == "not_cached", "\(miss.text)")
        try c.send(httpGet("/images/5"))
        let fetched = try c.response()
        #expect(try fetched.status == 200 && fetched.body == (f.nginx.files!.bytes(f.nginx.files!.imageFiles()[5])))
        try c.send(httpGet("/images/5?fetch=0"))
        #expect(try c.response().status == 200)
    }

    /// A hit is read straight from the index; an object file removed behind
    /// the daemon's back is downloaded again, and a corrupt one is never sent.
    @Test func aMissingOrCorruptObjectFileIsFetchedAgainNotServed() throws {
        let f = try HTTPFixture()
        let files = f.nginx.files!
        let (image, path) = try f.daemon.prefetchedImage(row: 2)
        let original = try files.bytes(try files.imageFiles()[2])
        try FileManager.default.removeItem(atPath: path)
        func counted() throws -> (hits: Int, misses: Int) {
            let c = try f.daemon.call("status")["counters"]
            return (c?["hits"]?.int ?? -1, c?["misses"]?.int ?? -1)
        }
        let before = try counted()
        let again = try f.curl([f.base + "/images/2"])
        #expect(again.heads.hasPrefix("HTTP/1.1 200 ") && again.body == original, "\(again.heads)")
        #expect(FileManager.default.fileExists(atPath: path), "downloaded again into \(path)")
        let after = try counted()
        #expect(after.hits == before.hits && after.misses == before.misses + 1, "counted once, as a miss: \(before) -> \(after)")
        _ = try f.curl([f.base + "/images/2"])
        #expect(try counted().hits == after.hits + 1, "then a hit")
        // Flip a byte: the read's verification quarantines it; the bytes sent are the origin's.
        var bad = original
        bad[bad.count / 2] ^= 0xFF
        chmod(path, 0o644)
        try Data(bad).write(to: URL(fileURLWithPath: path))
        let repaired = try f.curl([f.base + "/objects/" + (image["hash"]?.string ?? "")])
        #expect(repaired.body == original || repaired.heads.hasPrefix("HTTP/1.1 404 "), "never the corrupt bytes: \(repaired.heads)")
        #expect(repaired.body != bad)
    }

    @Test func connectionsOverTheLimitGet503AndIdleOnesAreClosed() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--max-connections", "3", "--idle-timeout", "1"])
        // The test's own socket client may hold one; two raw ones fill the rest.
        let a = try RawHTTP(path: f.httpSocket), b = try RawHTTP(path: f.httpSocket), c = try RawHTTP(path: f.httpSocket)
        let d = try RawHTTP(path: f.httpSocket)
        try d.send(httpGet("/healthz"))
        let busy = try d.response()
        #expect(busy.status == 503 && busy.errorCode == "busy" && busy.header("retry-after") == "1", "\(busy.status) \(busy.text)")
        // Idle connections are closed after the timeout; the slots free up.
        #expect(a.closesConnection() && b.closesConnection() && c.closesConnection())
        let e = try RawHTTP(path: f.httpSocket)
        try e.send(httpGet("/healthz"))
        #expect(try e.response().status == 200)
    }

    /// A client that pipelines requests and does not read is bounded by
    /// max-queued-bytes: the daemon stops reading it, and everything it
    /// asked for arrives once it reads.
    @Test func aClientThatDoesNotReadIsBoundedAndLosesNothing() throws {
        let f = try HTTPFixture(arguments: ["--max-queued-bytes", "64K"])
        let c = try RawHTTP(path: f.httpSocket, timeout: 30)
        let count = 300  // about 8 MB of answers
        let burst = Array(String(repeating: httpGet("/posts"), count: count).utf8)
        let fd = c.fd
        let written = DispatchSemaphore(value: 0)
        let writer = Thread {
            defer { written.signal() }
            var sent = 0
            while sent < burst.count {
                let n = burst.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return }
                sent += n
            }
        }
        writer.start()
        defer { shutdown(fd, Int32(SHUT_RDWR)); written.wait() }
        usleep(500_000)
        let status = try String(contentsOfFile: "/proc/\(f.daemon.pid)/status", encoding: .utf8)
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.map { String($0) } ?? ""
        let expected = try f.curl([f.base + "/posts"]).body
        for i in 0..<count {
            let r = try c.response()
            guard r.status == 200, r.body == expected else { Issue.record("answer \(i): \(r.status), \(r.body.count) bytes"); return }
        }
        let kib = Int(rss.split(separator: " ").dropFirst().first ?? "") ?? 0
        print("[http] the daemon's resident memory with \(count) answers asked for and none read: \(rss)")
        #expect(kib < 64 << 10, "a client that does not read made the daemon hold \(kib) KiB")
    }

    @Test func adminRoutesAreOffUnlessAllowedAndThenOnlyPOSTFromTheSameOrigin() throws {
        let off = try HTTPFixture(prefetch: false)
        let c = try RawHTTP(path: off.httpSocket)
        try c.send(httpGet("/gc", method: "POST", ["Content-Length: 0"]))
        let refused = try c.response()
        #expect(refused.status == 403 && refused.text.contains("http-allow-admin"), "\(refused.text)")

        let on = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin"])
        let d = try RawHTTP(path: on.httpSocket, timeout: 60)
        try d.send(httpGet("/prefetch?what=posts"))
        let get = try d.response()
        #expect(get.status == 405 && get.header("allow") == "POST")
        try d.send(httpGet("/prefetch?what=posts", method: "POST", ["Origin: http://evil.example"]))
        #expect(try d.response().status == 403)
        try d.send(httpGet("/prefetch?what=everything", method: "POST"))
        #expect(try d.response().status == 400)
        try d.send(httpGet("/prefetch?what=posts", method: "POST", ["Origin: http://localhost", "Content-Length: 0"]))
        let prefetch = try d.response()
        #expect(try prefetch.status == 200 && (JSONParser.parse(prefetch.body))["posts"]?["fetched"]?.int == 100, "\(prefetch.text)")
        for op in ["verify", "gc", "compact"] {
            try d.send(httpGet("/" + op, method: "POST"))
            let r = try d.response()
            #expect(try r.status == 200 && (JSONParser.parse(r.body))["ok"] == .bool(true), "\(op): \(r.text)")
        }
    }

    /// A page elsewhere that rebinds its own name to 127.0.0.1 sends that
    /// name as the Host: it is refused (421), for every route, over TCP
    /// and over the Unix socket (which nginx passes such a Host to).
    @Test func onlyAddressesLocalhostAndAllowedNamesAreServed() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin", "--http-allowed-hosts", "cache.example.org"])
        for (host, status) in [("evil.example:\(f.port)", 421), ("127.0.0.1:\(f.port)", 200), ("localhost", 200), ("[::1]:\(f.port)", 200),
                               ("cache.example.org", 200), ("Cache.Example.Org:80", 200), ("127.0.0.1.evil.example", 421)] {
            let r = try f.curl(["-H", "Host: \(host)", f.base + "/healthz"])
            #expect(r.heads.hasPrefix("HTTP/1.1 \(status) "), "Host \(host): \(r.heads)")
        }
        let rebound = try f.curl(["-X", "POST", "-H", "Host: evil.example:\(f.port)", "-H", "Origin: http://evil.example:\(f.port)",
                                  f.base + "/prefetch?what=all"])
        #expect(rebound.heads.hasPrefix("HTTP/1.1 421 "), "a rebound page's POST: \(rebound.heads)")
        // The Unix socket too: behind a proxy, it gets whatever Host the proxy's clients sent.
        let viaSocket = try f.curl(["--unix-socket", f.httpSocket, "-H", "Host: anything.example", "http://x/healthz"])
        #expect(viaSocket.heads.hasPrefix("HTTP/1.1 421 "), "\(viaSocket.heads)")
        let allowedViaSocket = try f.curl(["--unix-socket", f.httpSocket, "-H", "Host: cache.example.org:8443", "http://x/healthz"])
        #expect(allowedViaSocket.heads.hasPrefix("HTTP/1.1 200 "), "\(allowedViaSocket.heads)")
        // An old browser's form POST (no Origin) is refused by its body's type.
        let form = try f.curl(["-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded", "--data", "a=1", f.base + "/gc"])
        #expect(form.heads.hasPrefix("HTTP/1.1 403 "), "\(form.heads)")
        let plain = try f.curl(["-X", "POST", f.base + "/gc"])
        #expect(plain.heads.hasPrefix("HTTP/1.1 200 "), "\(plain.heads)")
    }

    /// curl sends `Expect: 100-continue` with larger bodies and waits for
    /// `100 Continue`: both sides must agree on where the next request starts.
    @Test func expectContinueIsAnsweredSoTheBodyIsWhereTheClientPutsIt() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin"])
        let c = try RawHTTP(path: f.httpSocket)
        let body = String(repeating: "x", count: 2000)
        try c.send("POST /gc HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
        let interim = try c.response(head: true)
        #expect(interim.status == 100, "\(interim.status)")
        try c.send(body + httpGet("/healthz"))
        #expect(try c.response().status == 200)  // the gc
        #expect(try c.response().status == 200)  // the next request, after the body
        let scratch = Scratch()
        try Data(body.utf8).write(to: URL(fileURLWithPath: scratch.path + "/body"))
        // (A form's body type is refused on admin routes: curl -d's default.)
        let twice = try f.curl(["-v", "-H", "Expect: 100-continue", "-H", "Content-Type: application/octet-stream",
                                "--data-binary", "@" + scratch.path + "/body", f.base + "/gc", f.base + "/gc"])
        #expect(twice.heads.components(separatedBy: "HTTP/1.1 200 ").count == 3 && !twice.stderr.contains("Connection died"),
                "\(twice.heads)\n\(twice.stderr.suffix(1500))")
    }

    /// A head or body sent a byte at a time may take http-request-timeout;
    /// a client that stops reading its answers is closed after idle-timeout.
    @Test func slowRequestsAndUnreadStreamsAreClosed() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-request-timeout", "1", "--idle-timeout", "2", "--max-queued-bytes", "64K"])
        let slow = try RawHTTP(path: f.httpSocket)
        try slow.send("GET /posts/1 HTTP/1.1\r\nHo")
        let r = try slow.response()
        #expect(r.status == 408 && slow.closesConnection(), "\(r.status) \(r.text)")
        let body = try RawHTTP(path: f.httpSocket)
        try body.send("POST /gc HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        _ = try body.response()  // 403: admin is off; its body is still awaited
        #expect(try body.response().status == 408)
        // A client that asks for more than the socket buffers hold and never
        // reads: its answers wait unsent, and after idle-timeout it is
        // closed (an event stream that is not read is closed the same way).
        _ = try cachectl(["prefetch", "posts"], socket: f.daemon.socket)
        let reader = try RawHTTP(path: f.httpSocket, timeout: 30)
        try reader.send(String(repeating: httpGet("/posts"), count: 100))
        #expect(waitUntil(20) { f.daemon.log.contains("idle for more than 2 s") }, "\(f.daemon.log.suffix(2000))")
        var answers = 0
        while (try? reader.response()) != nil { answers += 1 }
        #expect(answers < 100, "the connection was closed before all 100 answers: \(answers)")
    }

    /// Slowloris (issue 22): a connection that never sends a byte gets 408
    /// after http-request-timeout, timed from accept (before, it held its
    /// place for idle-timeout); at http-max-connections the oldest one
    /// silent for a second makes room for a new client (before: 503).
    @Test func silentConnectionsNeitherLastNorLockHTTPOut() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-request-timeout", "1", "--idle-timeout", "300"])
        let silent = try RawHTTP(path: f.httpSocket)
        let r = try silent.response()
        #expect(r.status == 408 && silent.closesConnection(), "\(r.status) \(r.text)")

        let g = try HTTPFixture(prefetch: false, arguments: ["--http-max-connections", "2", "--http-request-timeout", "30"])
        let a = try RawHTTP(path: g.httpSocket), b = try RawHTTP(path: g.httpSocket)
        _ = (a, b)
        Thread.sleep(forTimeInterval: 1.3)
        let c = try RawHTTP(path: g.httpSocket)
        try c.send(httpGet("/healthz"))
        #expect(try c.response().status == 200)
        #expect(a.closesConnection(), "the oldest silent connection made room")
    }

    @Test func httpConnectionsHaveALimitOfTheirOwn() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-max-connections", "2"])
        let a = try RawHTTP(path: f.httpSocket), b = try RawHTTP(path: f.httpSocket)
        _ = (a, b)
        let c = try RawHTTP(path: f.httpSocket)
        try c.send(httpGet("/healthz"))
        let busy = try c.response()
        #expect(busy.status == 503 && busy.text.contains("(2)"), "\(busy.text)")
        // The JSON-lines socket still has room.
        #expect(try f.daemon.call("ping")["ok"] == .bool(true))
    }

    /// systemd passes the HTTP socket under the name `http`
    /// (systemd/cached-http.socket); the other one is the JSON-lines socket.
    @Test func socketActivationServesHTTPOnTheSocketNamedHttp() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate),
                     "systemd-socket-activate is missing: `make deps` installs the systemd package")
        let scratch = Scratch()
        let lines = scratch.path + "/cached.sock", http = scratch.path + "/http.sock"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: activate)
        p.arguments = ["-l", lines, "-l", http, "--fdname=cached:http", Paths.cached, "--store", scratch.path + "/store"]
        p.standardError = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() } }
        #expect(waitUntil(10) { FileManager.default.fileExists(atPath: http) })
        // The first connection starts the daemon, which answers HTTP on fd 4.
        let c = try RawHTTP(path: http)
        try c.send(httpGet("/healthz"))
        #expect(try c.response().status == 200)
        #expect(try Client(socketPath: lines).call("ping")["ok"] == .bool(true))
        p.terminate()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
    }

    @Test func httpListenTakesLiteralAddressesAndWarnsOffLoopback() throws {
        for bad in ["localhost:80", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "[::1]80", "relative/path.sock", "1.2.3:80",
                    "127.0.0.1:80,127.0.0.1:80"] {
            let r = try runProgram(Paths.cached, ["--check-config", "--http-listen", bad])
            #expect(r.status != 0 && r.output.contains("http-listen"), "\(bad): \(r.output)")
        }
        let ok = try runProgram(Paths.cached, ["--check-config", "--http-listen", "127.0.0.1:8080, [::1]:8080,/run/cached/http.sock"])
        #expect(ok.status == 0 && ok.output.contains("127.0.0.1:8080,[::1]:8080,/run/cached/http.sock"), "\(ok.output)")
        let port = try unusedLocalPort()
        let d = try Daemon(origin: nil, arguments: ["--http-listen", "0.0.0.0:\(port)"])
        #expect(d.log.contains("serving HTTP on 0.0.0.0:\(port), which is not a loopback address"), "\(d.log)")
        let inUse = try Daemon(origin: nil, arguments: ["--http-listen", "0.0.0.0:\(port)"], waitReady: false)
        #expect(inUse.waitForExit() != 0 && inUse.log.contains("cannot serve HTTP on 0.0.0.0:\(port)"), "\(inUse.log)")
    }
}
