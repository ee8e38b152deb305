import Foundation
import Testing
import CacheProtocol

/// A feed holding both the integer `5` and the string `"5"` (docs/protocol.md,
/// "Post ids") in the page at `/`, in headless Chromium: each post's link
/// opens that post, not the other kind's (a newcomer found `/posts/5` and
/// `cachectl get post 5` giving different posts, and the string one
/// unreachable from the page's list), an integer id past 2^53, and a
/// manifest row without a URL (a row with no image, not a failure).
@Suite(.serialized) struct HTTPPageKindsTests {
    static let feed = #"[{"id":5,"title":"the integer 5"},{"id":"5","title":"the string 5"},{"id":"a?b","title":"a question"},{"id":9007199254740993,"title":"past a double"}]"#

    @Test func eachKindOfIdOpensItsOwnPost() throws {
        let nginx = try Nginx()
        let root = try #require(nginx.files).root
        for (name, text) in [("kinds.json", Self.feed), ("no-images.json", #"[{"description":"a post without an image"}]"#)] {
            try text.write(toFile: root + "/" + name, atomically: false, encoding: .utf8)
            chmod(root + "/" + name, 0o644)
        }
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/kinds.json", "--images-url", nginx.base + "/no-images.json", "--http-listen", "127.0.0.1:\(port)"])
        let prefetch = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        try #require(prefetch.status == 0, "\(prefetch.stderr)")
        let title = "document.querySelector('#detail-post h2')?.textContent"
        let noImage = "document.querySelector('tr[data-row=\"0\"] [data-state]')?.getAttribute('data-state')"
        let links = "[...document.querySelectorAll('article.post h2 a')].map(a => [a.textContent, a.getAttribute('href')])"
        let page = try PageCheck.run(
            url: "http://127.0.0.1:\(port)/", artifact: "http-post-kinds",
            until: PageCheck.summary("s.dataset.posts === '4' && s.dataset.rows === '1'"),
            actions: [.do("location.hash = document.querySelectorAll('article.post h2 a')[1].getAttribute('href')"),
                      .step("\(title) === 'the string 5'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[0].getAttribute('href')"),
                      .step("\(title) === 'the integer 5'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[2].getAttribute('href')"),
                      .step("\(title) === 'a question'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[3].getAttribute('href')"),
                      .step("\(title) === 'past a double'")],
            eval: [links, noImage], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        // A row without a URL has no image: the page says so, HTTP answers 404
        // and cachectl exits 4 (not found), not 502 and 6 (the origin's failure).
        #expect(page.eval(noImage) == .string("none"))
        #expect((try? SimpleHTTP.get(port: port, path: "/images/0"))?.status == 404)
        let image = try cachectl(["get", "image", "0"], socket: daemon.socket)
        #expect(image.status == 4 && image.stderr.contains("row 0 has no image"), "\(image.stderr)")
        #expect(page.errors.isEmpty, "the page logged errors: \(page.errors)")
        #expect(page.eval(links) == .array([.array([.string("the integer 5"), .string("#post/5")]),
                                            .array([.string("the string 5"), .string("#post/5?string")]),
                                            .array([.string("a question"), .string("#post/a%3Fb")]),
                                            .array([.string("past a double"), .string("#post/9007199254740993")])]),
                "\(page.eval(links).map { String(decoding: $0.encoded, as: UTF8.self) } ?? "none")")
    }
}
