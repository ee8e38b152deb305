import Foundation
import Testing
import CacheDaemon
import CacheHTTP
import CacheProtocol
import CacheStore
import CacheSystem

/// The socket dispatcher and the HTTP routes without sockets: the real
/// handlers over the real service and a store seeded here, through
/// `DispatchHarness` (as swift-nio tests a handler on its embedded
/// channel), each answer taken whole, now or from the mailbox later.
@Suite(.serialized) struct DispatchTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("the rest of a png".utf8)
    static let posts: [(PostID, [UInt8])] = [(.int(1), Array(#"{"id":1,"title":"one"}"#.utf8)), (.int(2), Array(#"{"id":2,"title":"two"}"#.utf8))]

    /// A store with two posts, two rows (row 0 cached), no origin.
    static func harness() throws -> (DispatchHarness, String, Hash128) {
        var template = Array("/tmp/cached-dispatch-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let store = try Store(StoreConfiguration(directory: dir))
        _ = try store.replacePosts(posts, pages: [FeedPage(url: "", count: 2)])
        try store.replaceManifest([("a.png", "first"), ("b.png", nil)], pages: [FeedPage(url: "", count: 2)])
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try png.withUnsafeBytes { try w.append($0) }
        let ref = try store.commitObject(w, rows: [(0, "a.png")])
        store.close()
        return (try DispatchHarness(directory: dir), dir, ref.hash)
    }

    static func json(_ line: String, _ h: DispatchHarness) throws -> (JSON, [UInt8], Int) {
        let answer = try #require(h.answer(Array(line.utf8)), "no answer to \(line)")
        let end = answer.bytes.firstIndex(of: 0x0A) ?? answer.bytes.count
        return (try JSONParser.parse(answer.bytes[..<end]), Array(answer.bytes[min(end + 1, answer.bytes.count)...]), answer.passed)
    }

    @Test func theSocketsOperationsAnswerAsTheProtocolSays() throws {
        let (h, dir, hash) = try Self.harness()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try Self.json(#"{"op":"ping"}"#, h).0["protocol"]?.integer == 1)
        #expect(try Self.json(#"{"op":"status","tag":7}"#, h).0["posts"]?.integer == 2)
        #expect(try Self.json(#"{"op":"status","tag":7}"#, h).0["tag"]?.integer == 7, "the tag comes back")
        #expect(try Self.json(#"{"op":"get_post","id":"2"}"#, h).0["post"]?["title"]?.string == "two", "\"2\" finds the integer 2")
        #expect(try Self.json(#"{"op":"get_post","id":3}"#, h).0["error"]?["code"]?.string == "not_found")
        let listed = try Self.json(#"{"op":"list_posts","offset":1}"#, h).0
        #expect(listed["total"]?.integer == 2 && listed["ids"] == .array([.number("2")]))
        #expect(try Self.json(#"{"op":"get_image","row":0}"#, h).0["image"]?["hash"]?.string == hash.hex)
        #expect(try Self.json(#"{"op":"get_image","row":1,"fetch":false}"#, h).0["error"]?["code"]?.string == "not_cached")
        #expect(try Self.json(#"{"op":"get_image","row":9}"#, h).0["error"]?["code"]?.string == "not_found")
        // Row 1 not cached and fetched: there is no origin to fetch it from.
        #expect(try Self.json(#"{"op":"get_image","row":1}"#, h).0["error"]?["code"]?.string == "upstream")
        #expect(try Self.json(#"{"op":"list_images"}"#, h).0["images"]?.array?.count == 2)
        let (head, bytes, _) = try Self.json(#"{"op":"read","hash":"\#(hash.hex)"}"#, h)
        #expect(head["size"]?.integer == Int64(Self.png.count) && bytes == Self.png, "read: the line, then exactly the bytes")
        let (opened, _, passed) = try Self.json(#"{"op":"open","hash":"\#(hash.hex)"}"#, h)
        #expect(opened["size"]?.integer == Int64(Self.png.count) && passed == 1, "open passes one descriptor")
        #expect(try Self.json(#"{"op":"read","hash":"00000000000000000000000000000000"}"#, h).0["error"]?["code"]?.string == "not_found")
        #expect(try Self.json(#"{"op":"open","hash":"00000000000000000000000000000000"}"#, h).2 == 0, "no descriptor with an error")
        let gc = try Self.json(#"{"op":"gc"}"#, h).0
        #expect(gc["ok"] == .bool(true) && gc["removed"]?.integer == 0, "a later answer through the mailbox: \(gc)")
        let verify = try Self.json(#"{"op":"verify"}"#, h).0
        #expect(verify["checked"]?.integer == 1 && verify["corrupt"] == .array([]))
    }

    /// A request parsed as the loop parses it.
    static func request(_ text: String) throws -> HTTPRequest {
        let bytes = Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8)
        guard case .request(let r, _) = bytes.withUnsafeBytes({ HTTPParser.parse($0, limits: HTTPLimits()) }) else {
            throw DispatchTestError("not a request: \(text)")
        }
        return r
    }

    struct DispatchTestError: Error { var text: String; init(_ t: String) { text = t } }

    /// Status line, headers (lowercased names) and body of an answer.
    static func http(_ text: String, _ h: DispatchHarness) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        let bytes = try #require(h.answer(try request(text)), "no answer to \(text)")
        let blank: [UInt8] = [13, 10, 13, 10]
        let found = (0..<max(0, bytes.count - 3)).first { (i: Int) -> Bool in Array(bytes[i..<i + 4]) == blank }
        let end = try #require(found, "no end of head in \(bytes.count) bytes")
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (Int(lines[0].split(separator: " ")[1]) ?? 0, headers, Array(bytes[(end + 4)...]))
    }

    @Test func theHTTPRoutesAnswerAsHTTPMdSays() throws {
        let (h, dir, hash) = try Self.harness()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let host = "Host: 127.0.0.1:8080\n"
        let posts = try Self.http("GET /posts HTTP/1.1\n\(host)\n", h)
        #expect(posts.status == 200 && posts.headers["x-total-count"] == "2")
        #expect(try JSONParser.parse(posts.body).array?.count == 2)
        #expect(try Self.http("GET /posts/1 HTTP/1.1\n\(host)\n", h).body == Self.posts[0].1)
        #expect(try Self.http("GET /posts/9 HTTP/1.1\n\(host)\n", h).status == 404)
        let image = try Self.http("GET /images/0 HTTP/1.1\n\(host)\n", h)
        #expect(image.status == 200 && image.body == Self.png && image.headers["content-type"] == "image/png")
        #expect(image.headers["etag"] == "\"\(hash.hex)\"" && image.headers["cache-control"] == "no-cache")
        #expect(try Self.http("GET /images/0 HTTP/1.1\n\(host)If-None-Match: \"\(hash.hex)\"\n\n", h).status == 304)
        let part = try Self.http("GET /images/0 HTTP/1.1\n\(host)Range: bytes=0-3\n\n", h)
        #expect(part.status == 206 && part.body == Array(Self.png.prefix(4)) && part.headers["content-range"] == "bytes 0-3/\(Self.png.count)")
        #expect(try Self.http("GET /images/0 HTTP/1.1\n\(host)Range: bytes=999-\n\n", h).status == 416)
        let notCached = try Self.http("GET /images/1?fetch=0 HTTP/1.1\n\(host)\n", h)
        let notCachedBody = try JSONParser.parse(notCached.body)
        #expect(notCached.status == 404 && notCachedBody["error"]?["code"]?.string == "not_cached")
        let object = try Self.http("GET /objects/\(hash.hex) HTTP/1.1\n\(host)\n", h)
        #expect(object.status == 200 && object.headers["cache-control"] == "public, max-age=31536000, immutable" && object.body == Self.png)
        let head = try Self.http("HEAD /objects/\(hash.hex) HTTP/1.1\n\(host)\n", h)
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-length"] == String(Self.png.count))
        #expect(try Self.http("GET /images/0?w=0 HTTP/1.1\n\(host)\n", h).status == 400, "a variant's bad size")
        let metrics = try Self.http("GET /metrics HTTP/1.1\n\(host)\n", h)
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("\ncached_posts 2\n"))
        #expect(try Self.http("GET /nowhere HTTP/1.1\n\(host)\n", h).status == 404)
        #expect(try Self.http("POST /prefetch HTTP/1.1\n\(host)Content-Length: 0\n\n", h).status == 403, "admin is off")
    }
}
