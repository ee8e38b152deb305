import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Anything on the host may connect and send anything: limits hold, the
/// daemon neither crashes nor wedges, and other clients keep being served.
@Suite struct AbuseTests {
    static func rss(_ pid: Int32) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
        return 0
    }

    @Test func athousandConnectionsAtOnceAndAnotherClientIsStillServed() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 2200 { limit.rlim_cur = min(limit.rlim_max, 2200); setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) }
        try #require(limit.rlim_cur >= 1100, "the test process cannot open 1,000 sockets (open-file limit \(limit.rlim_cur))")
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        var clients: [Client] = []
        for i in 0..<1000 {
            let c = try daemon.client()
            try c.send(Request.line(op: "ping", [("tag", num(i))]))
            clients.append(c)
        }
        for (i, c) in clients.enumerated() { #expect(try c.readJSON()["tag"] == num(i)) }
        #expect(try daemon.call("status")["counters"]?["connections"]?.int ?? 0 >= 1000)
        #expect(try daemon.call("get_post", [("id", num(5))])["post"]?["id"]?.int == 5, "another client is answered")
        clients.removeAll()
        #expect(waitUntil(10) { (try? daemon.call("status")["counters"]?["connections"]?.int) == 1 })
    }

    @Test func pastMaxConnectionsTheNextClientIsToldBusy() throws {
        let daemon = try Daemon(origin: nil, arguments: ["--max-connections", "5"])
        var held: [Client] = []
        for _ in 0..<5 { let c = try daemon.client(); _ = try c.call("ping"); held.append(c) }
        let extra = try daemon.client()
        let r = try extra.readJSON()
        #expect(r["error"]?["code"] == .string("busy"), "\(r)")
        #expect(throws: ClientError.self) { _ = try extra.readLine() }
        held.removeLast()
        #expect(waitUntil(5) { (try? daemon.call("ping"))?["ok"] == .bool(true) }, "a freed slot is usable")
    }

    @Test func silentConnectionsAreClosedButBusyOnesAreNot() throws {
        let origin = try Origin(delay: 0.6)
        let daemon = try Daemon(origin: origin, arguments: ["--idle-timeout", "1"])
        let silent = try daemon.client()
        let waiting = try daemon.client()
        try waiting.send(Request.line(op: "prefetch", [("what", .string("posts"))]))
        let chatty = try daemon.client()
        for _ in 0..<10 { usleep(300_000); #expect(try chatty.call("ping")["ok"] == .bool(true)) }
        #expect(throws: ClientError.self, "the silent connection was closed") { _ = try silent.readLine() }
        #expect(try waiting.readJSON()["posts"]?["fetched"]?.int == 100, "a client waiting for an answer is not idle")
    }

    @Test func aClientThatNeverReadsCannotGrowTheDaemon() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let before = Self.rss(daemon.pid)
        // 3,000 list_posts of about 27 KiB each: 80 MiB of answers, never read.
        let hog = try daemon.client()
        let fd = hog.descriptor
        try fd.setNonBlocking()
        let line = Request.line(op: "list_posts")
        var sent = 0
        let deadline = Date().addingTimeInterval(5)
        while sent < 3000 && Date() < deadline {
            let n = (try? line.withBytes { (raw) throws(SystemError) in try UnixSocket.send(fd, raw) }) ?? 0
            if n == line.count { sent += 1 } else { usleep(10_000) }
        }
        usleep(300_000)
        let after = Self.rss(daemon.pid)
        #expect(sent < 3000, "the daemon stopped reading: the kernel buffers filled up")
        #expect(after - before < 48 << 20, "resident memory grew by \(formatSize(Int64(after - before)))")
        #expect(try daemon.call("get_post", [("id", num(9))])["post"]?["id"]?.int == 9, "others are still served")
        // The hog reads after all: every answer it asked for arrives, in order.
        try fd.setNonBlocking(false)
        for i in 0..<min(sent, 50) { #expect(try hog.readJSON()["total"]?.int == 100, "answer \(i)") }
    }

    /// Many clients that never read, together past max-queued-bytes-total
    /// (issue 22): a new client's listing is refused `busy` (its size is
    /// unknown until built), its other requests, a liveness `ping` among
    /// them, are answered; the hogs that stopped reading are closed.
    @Test func pastTheTotalBoundAListingIsBusyAndAPingIsAnswered() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--max-queued-bytes", "64K", "--max-queued-bytes-total", "1M"])
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let line = Request.line(op: "list_posts")
        var hogs: [Client] = []
        for _ in 0..<40 {  // 40 x more than 64 KiB of 27 KiB listings: past 1 MiB together
            let hog = try daemon.client()
            try hog.descriptor.setNonBlocking()
            for _ in 0..<64 { _ = try? line.withBytes { (raw) throws(SystemError) in try UnixSocket.send(hog.descriptor, raw) } }
            hogs.append(hog)
        }
        // The hogs' answers are made as the daemon reads their requests, which
        // on a loaded machine takes longer than any fixed wait (300 ms was
        // not always enough): a fresh client asks until the total is passed,
        // reading each answer itself, so its own listings never count.
        let fresh = try daemon.client()
        var listing = JSON.null
        _ = waitUntil(10) {
            listing = (try? fresh.call("list_posts")) ?? .null
            return listing["error"]?["code"]?.string == "busy"
        }
        #expect(listing["error"]?["code"]?.string == "busy", "\(String(describing: listing).prefix(300))")
        #expect(listing["error"]?["message"]?.string?.contains("max-queued-bytes-total") == true)
        #expect(try fresh.call("ping")["ok"] == .bool(true))
        #expect(try daemon.call("get_post", [("id", num(9))])["post"]?["id"]?.int == 9)
        #expect(waitUntil(10) { daemon.log.contains("connections that stopped reading") }, "\(daemon.log.suffix(1500))")
        #expect(waitUntil(10) { (try? daemon.call("list_posts", [("limit", num(1))]))?["total"]?.int == 100 },
                "once the hogs are closed, listings are made again")
    }

    @Test func tenThousandRandomAndMutatedLinesThenCorrectAnswers() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let seeds = [#"{"op":"get_post","id":3}"#, #"{"op":"list_posts","limit":2}"#, #"{"op":"ping","tag":[1,{"a":null}]}"#,
                     #"{"op":"get_image","row":1,"fetch":false}"#, #"{"op":"read","hash":"99aa06d3014798d86001c324468d497f"}"#]
        var rng = SystemRandomNumberGenerator()
        let c = try daemon.client()
        var batch: [UInt8] = []
        var lines = 0
        for i in 0..<10_000 {
            var line: [UInt8]
            if i % 2 == 0 {
                line = (0..<Int.random(in: 0...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                line = Array(seeds.randomElement(using: &rng)!.utf8)
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    line[Int.random(in: 0..<line.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            line.removeAll { $0 == 0x0A }
            batch += line + [0x0A]
            lines += 1
            if batch.count > 64 << 10 {
                try c.send(batch)
                batch = []
            }
        }
        try c.send(batch)
        var answered = 0
        for _ in 0..<lines {
            let r = try c.readJSON()
            #expect(r["ok"] != nil || r["event"] != nil)
            answered += 1
        }
        #expect(answered == lines)
        #expect(try c.call("get_post", [("id", num(3))])["post"]?["id"]?.int == 3, "the same connection still works")
        #expect(try daemon.call("status")["posts"]?.int == 100)
    }

    @Test func hostileValuesGetClearErrors() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        let c = try daemon.client()
        let deep = #"{"op":"ping","x":"# + String(repeating: "[", count: 30_000) + String(repeating: "]", count: 30_000) + "}"
        let cases: [(String, String)] = [
            (deep, "bad_request"),
            (#"{"op":"get_post","id":1e400}"#, "bad_request"),
            (#"{"op":"get_post","id":18446744073709551616}"#, "bad_request"),
            (#"{"op":"get_post","id":-9223372036854775808}"#, "not_found"),
            (#"{"op":"get_post","id":-1}"#, "not_found"),
            (#"{"op":"get_image","row":-1}"#, "bad_request"),
            (#"{"op":"get_image","row":2147483648}"#, "bad_request"),
            (#"{"op":"list_posts","offset":-5}"#, "bad_request"),
            (#"{"op":"read","hash":"../../../../etc/passwd"}"#, "bad_request"),
            (#"{"op":"read","hash":"..%2f..%2fetc%2fpasswd0000000000"}"#, "bad_request"),
            (#"{"op":"get_post","id":"1; rm -rf /"}"#, "not_found"),  // a string id, looked up, never run or opened
            (#"{"op":"get_post","id":""}"#, "bad_request"),
            ("{\"op\":\"ping\u{0}\"}", "bad_request"),
        ]
        for (line, code) in cases {
            try c.send(Array(line.utf8) + [0x0A])
            let r = try c.readJSON()
            #expect(r["error"]?["code"] == .string(code), "\(line.prefix(60)): \(r)")
        }
        #expect(try c.call("ping")["ok"] == .bool(true))
    }

    @Test func nestingDepthIsASetting() throws {
        let daemon = try Daemon(origin: nil, arguments: ["--max-json-depth", "4"])
        let c = try daemon.client()
        try c.send(Array(#"{"op":"ping","tag":[[[1]]]}"#.utf8) + [0x0A])
        #expect(try c.readJSON()["ok"] == .bool(true), "3 levels inside the request object: accepted")
        try c.send(Array(#"{"op":"ping","tag":[[[[1]]]]}"#.utf8) + [0x0A])
        let r = try c.readJSON()
        #expect(r["error"]?["code"] == .string("bad_request"))
        #expect(r["error"]?["message"]?.string?.contains("nested deeper than 4") == true, "\(r)")
    }

    @Test func aSymlinkPlantedInTheStoreIsNotFollowed() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let (image, path) = try daemon.prefetchedImage(row: 3)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/etc/passwd")
        let c = try daemon.client()
        try c.send(Request.line(op: "read", [("hash", image["hash"]!)]))
        let r = try c.readJSON()
        if let size = r["size"]?.int {
            var bytes: [UInt8] = []
            try c.readBytes(size) { bytes += $0 }
            #expect(!String(decoding: bytes, as: UTF8.self).contains("root:"), "never the symlink's target")
            #expect(Hash128Hex.of(path) == image["hash"]?.string, "the image was fetched again")
        } else {
            #expect(r["ok"] == .bool(false), "\(r)")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.store)
        #expect((attributes[.posixPermissions] as? Int) == 0o700, "the store is private")
    }
}
