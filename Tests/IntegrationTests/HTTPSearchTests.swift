import Foundation
import Testing
import CacheProtocol

/// `/posts?q=` and `?with_ids=1`, `list_posts`'s `query` over the socket
/// and `cachectl get posts --query`, against the bundled origin's 100 posts
/// (docs/http.md, docs/protocol.md), and the page's admin attribute.
extension HTTPTests {
    @Test func aTitleSearchIsTheSameOverHTTPTheSocketAndCachectl() throws {
        let f = try HTTPFixture()
        let socket = try f.daemon.call("list_posts", [("query", .string("QUI")), ("offset", .number("1")), ("limit", .number("3"))])
        let total = try #require(socket["total"]?.int)
        #expect(total > 3 && total < 100, "some titles hold qui: \(total)")
        let http = try f.curl([f.base + "/posts?q=QUI&offset=1&limit=3&with_ids=1"])
        #expect(http.heads.contains("X-Total-Count: \(total)\r\n"), "\(http.heads)")
        let items = try JSONParser.parse(http.body).array ?? []
        #expect(items.map { $0["id"] } == (socket["ids"]?.array ?? []).map { Optional($0) }, "with_ids: the ids list_posts gives")
        #expect(items.map { $0["post"] } == (socket["posts"]?.array ?? []).map { Optional($0) }, "with_ids: the stored posts")
        for item in items {
            let title = item["post"]?["title"]?.string ?? ""
            #expect(title.lowercased().contains("qui"), "\(item)")
        }
        let plain = try f.curl([f.base + "/posts?q=qui&offset=1&limit=3"])
        #expect(try JSONParser.parse(plain.body).array == socket["posts"]?.array, "without with_ids: the posts alone")
        let spaced = try f.curl([f.base + "/posts?q=%20&limit=1"])
        #expect(spaced.heads.hasPrefix("HTTP/1.1 200 "), "a space is a search like another: \(spaced.heads)")

        let tooLong = try f.curl([f.base + "/posts?q=" + String(repeating: "a", count: 257)])
        #expect(tooLong.heads.hasPrefix("HTTP/1.1 400 ") && String(decoding: tooLong.body, as: UTF8.self).contains("256 bytes"), "\(tooLong.heads)")
        let badFlag = try f.curl([f.base + "/posts?with_ids=2"])
        #expect(badFlag.heads.hasPrefix("HTTP/1.1 400 "), "\(badFlag.heads)")

        let cli = try cachectl(["--json", "get", "posts", "--query", "QUI"], socket: f.daemon.socket)
        try #require(cli.status == 0, "\(cli.stderr)")
        #expect(try JSONParser.parse(Array(cli.stdout.utf8))["total"]?.int == total)
        let text = try cachectl(["get", "posts", "-q", "qui"], socket: f.daemon.socket)
        #expect(text.status == 0 && text.stdout.split(separator: "\n").count >= total, "\(text.stdout)")
        let misplaced = try cachectl(["get", "images", "--query", "qui"], socket: f.daemon.socket)
        #expect(misplaced.status == 2 && misplaced.stderr.contains("--query goes with get posts"), "\(misplaced.stderr)")

        let page = try f.curl([f.base + "/"])
        #expect(String(decoding: page.body, as: UTF8.self).contains("<body data-admin=\"0\">"), "no admin: no Prefetch button")
    }
}
