import Foundation
import Testing
import CacheDaemonHarness
import CacheHTTP
import CacheProtocol
import CacheStore
import CacheSystem

/// A store with two posts and two rows (row 0 cached, row 1 not), no
/// origin, behind the real dispatcher and HTTP front-end
/// (`DispatchHarness`, as swift-nio tests a handler on its embedded
/// channel); each answer taken whole, now or from the mailbox later.
struct DispatchFixture {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("the rest of a png".utf8)
    static let posts: [(PostID, [UInt8])] = [(.int(1), Array(#"{"id":1,"title":"one"}"#.utf8)), (.int(2), Array(#"{"id":2,"title":"two"}"#.utf8))]
    static let host = "Host: 127.0.0.1:8080\n"

    let harness: DispatchHarness
    let directory: String
    /// The hash of row 0's image.
    let hash: Hash128

    init(allowAdmin: Bool = false) throws {
        var template = Array("/tmp/cached-dispatch-XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        let store = try Store(StoreConfiguration(directory: directory))
        _ = try store.replacePosts(Self.posts, pages: [FeedPage(url: "", count: 2)])
        try store.replaceManifest([("a.png", "first"), ("b.png", nil)], pages: [FeedPage(url: "", count: 2)])
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try Self.png.withUnsafeBytes { try w.append($0) }
        hash = try store.commitObject(w, rows: [(0, "a.png")]).hash
        store.close()
        harness = try DispatchHarness(directory: directory, allowAdmin: allowAdmin)
    }

    /// Shuts the service down, then removes the store.
    func remove() {
        harness.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A socket request's answer line parsed, the bytes after it, and the descriptors passed.
    func socket(_ line: String) throws -> (json: JSON, rest: [UInt8], passed: Int) {
        let answer = try #require(harness.answer(Array(line.utf8)), "no answer to \(line)")
        let end = answer.bytes.firstIndex(of: 0x0A) ?? answer.bytes.count
        return (try JSONParser.parse(answer.bytes[..<end]), Array(answer.bytes[min(end + 1, answer.bytes.count)...]), answer.passed)
    }

    /// A socket request's error code, nil when it succeeded.
    func code(_ line: String) throws -> String? { try socket(line).json["error"]?["code"]?.string }

    /// A request parsed as the loop parses it (`\n` as CRLF).
    static func request(_ text: String) throws -> HTTPRequest {
        let bytes = Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8)
        guard case .request(let r, _) = bytes.withUnsafeBytes({ HTTPParser.parse($0, limits: HTTPLimits()) }) else {
            throw FixtureError("not a request: \(text)")
        }
        return r
    }

    struct FixtureError: Error { var text: String; init(_ t: String) { text = t } }

    /// An HTTP answer: status, headers (lowercased names) and body.
    struct HTTPAnswer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var json: JSON? { try? JSONParser.parse(body) }
        var errorCode: String? { json?["error"]?["code"]?.string }
    }

    /// `GET path` (or another method, with `headers`), answered whole.
    func http(_ path: String, method: String = "GET", headers: String = "") throws -> HTTPAnswer {
        let text = "\(method) \(path) HTTP/1.1\n\(Self.host)\(headers)\n"
        let bytes = try #require(harness.answer(try Self.request(text)), "no answer to \(text)")
        return try Self.parse(bytes)
    }

    static func parse(_ bytes: [UInt8]) throws -> HTTPAnswer {
        let blank: [UInt8] = [13, 10, 13, 10]
        let found = (0..<max(0, bytes.count - 3)).first { (i: Int) -> Bool in Array(bytes[i..<i + 4]) == blank }
        let end = try #require(found, "no end of head in \(bytes.count) bytes")
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPAnswer(status: Int(lines[0].split(separator: " ")[1]) ?? 0, headers: headers, body: Array(bytes[(end + 4)...]))
    }
}
