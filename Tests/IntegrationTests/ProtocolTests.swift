import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// The wire protocol over the real socket: framing, tags, errors, pipelining.
@Suite struct WireProtocolTests {
    @Test func malformedLinesGetBadRequestAndTheConnectionStaysUsable() throws {
        let daemon = try Daemon(origin: nil)
        let c = try daemon.client()
        for bad in ["hello", "{", "[1,2]", #"{"op":"get_post","id":""}"#, #"{"op":"teleport"}"#, "", "{\"op\":\"ping\"}}"] {
            try c.send(Array((bad + "\n").utf8))
            let r = try c.readJSON()
            #expect(r["ok"] == .bool(false), "\(bad)")
            #expect(r["error"]?["code"] == .string("bad_request"), "\(bad): \(r)")
            #expect(r["error"]?["message"]?.string?.isEmpty == false)
        }
        try c.send(Array([0xFF, 0xFE, 0x00, 0x0A]))
        #expect(try c.readJSON()["error"]?["code"] == .string("bad_request"))
        #expect(try c.call("ping")["ok"] == .bool(true))
    }

    @Test func tagsAreEchoedOnEveryLine() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let c = try daemon.client()
        try c.send(Array(#"{"op":"prefetch","what":"posts","progress":true,"tag":{"job":[1,"a"]}}"# .utf8) + [0x0A])
        var lines: [JSON] = []
        repeat { lines.append(try c.readJSON()) } while lines.last?["event"] != nil
        #expect(lines.count >= 2)
        for l in lines { #expect(l["tag"] == .object([("job", .array([.number("1"), .string("a")]))]), "\(l)") }
        try c.send(Array(#"{"op":"get_post","id":123456,"tag":"t"}"#.utf8) + [0x0A])
        #expect(try c.readJSON()["tag"] == .string("t"))
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let origin = try Origin(delay: 0.05)
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        // Mix answers from memory with answers that need the origin (slow) or the disk.
        var batch: [UInt8] = []
        var expected: [String] = []
        for i in 0..<60 {
            let tag = "r\(i)"
            expected.append(tag)
            switch i % 4 {
            case 0: batch += Request.line(op: "get_post", [("id", num(i % 100 + 1)), ("tag", .string(tag))])
            case 1: batch += Request.line(op: "get_image", [("row", num(i % 15)), ("tag", .string(tag))])
            case 2: batch += Request.line(op: "ping", [("tag", .string(tag))])
            default: batch += Request.line(op: "bogus", [("tag", .string(tag))])
            }
        }
        let c = try daemon.client()
        try c.send(batch)
        for (i, tag) in expected.enumerated() {
            let r = try c.readJSON()
            #expect(r["tag"] == .string(tag), "answer \(i): \(r)")
            if i % 4 == 0 { #expect(r["post"]?["id"]?.int == i % 100 + 1) }
            if i % 4 == 1 { #expect(r["image"]?["row"]?.int == i % 15, "\(r)") }
        }
    }

    @Test func anOversizedLineGetsTooLargeAndTheConnectionIsClosed() throws {
        let daemon = try Daemon(origin: nil)
        let c = try daemon.client()
        let huge = #"{"op":"ping","pad":""# + String(repeating: "x", count: 70 * 1024) + "\"}\n"
        try? c.send(Array(huge.utf8))
        let r = try c.readJSON()
        #expect(r["error"]?["code"] == .string("too_large"))
        #expect(throws: ClientError.self) { _ = try c.readLine() }
        #expect(try daemon.call("ping")["ok"] == .bool(true), "the daemon still serves others")
    }

    @Test func aLineOfExactlyTheLimitIsAccepted() throws {
        let daemon = try Daemon(origin: nil)
        let prefix = #"{"op":"ping","pad":""#
        let pad = String(repeating: "y", count: maxRequestLine - prefix.utf8.count - 2)
        let line = prefix + pad + "\"}"
        #expect(line.utf8.count == maxRequestLine)
        let c = try daemon.client()
        try c.send(Array((line + "\n").utf8))
        #expect(try c.readJSON()["ok"] == .bool(true))
    }

    @Test func clientsThatVanishMidAnswerDoNotHurtTheDaemon() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch")
        for _ in 0..<20 {
            let c = try daemon.client()
            try c.send(Request.line(op: "list_posts") + Request.line(op: "list_images") + Request.line(op: "prefetch"))
        }
        let hash = try daemon.call("get_image", [("row", num(8))])["image"]?["hash"] ?? .null
        for _ in 0..<20 {
            let c = try daemon.client()
            try c.send(Request.line(op: "read", [("hash", hash)]))
            _ = try c.readLine()
        }
        let c = try daemon.client()
        c.shutdownWrite()
        #expect(throws: ClientError.self) { _ = try c.readLine() }
        #expect(try daemon.call("status")["posts"]?.int == 100)
        #expect(daemon.isRunning)
    }

    @Test func aHalfClosedClientStillGetsItsAnswers() throws {
        let daemon = try Daemon(origin: nil)
        let c = try daemon.client()
        try c.send(Request.line(op: "ping", [("tag", num(1))]) + Request.line(op: "status", [("tag", num(2))]))
        c.shutdownWrite()
        #expect(try c.readJSON()["tag"] == num(1))
        #expect(try c.readJSON()["tag"] == num(2))
    }

    @Test func manyClientsAtOnce() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let failures = Locked(0)
        let socket = daemon.socket
        onThreads(32) { i in
            do {
                let c = try Client(socketPath: socket)
                for j in 0..<50 {
                    let id = (i * 50 + j) % 100 + 1
                    if try c.call("get_post", [("id", num(id))])["post"]?["id"]?.int != id { failures.withLock { $0 += 1 } }
                }
            } catch { failures.withLock { $0 += 1 } }
        }
        #expect(failures.withLock { $0 } == 0)
    }
}
