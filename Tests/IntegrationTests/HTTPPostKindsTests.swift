import Foundation
import Testing
import CacheProtocol

/// A feed holding both the integer `5` and the string `"5"` (docs/protocol.md,
/// "Post ids") in the page at `/`, in headless Chromium: each post's link
/// opens that post, not the other kind's (a newcomer found `/posts/5` and
/// `cachectl get post 5` giving different posts, and the string one
/// unreachable from the page's list).
@Suite(.serialized) struct HTTPPostKindsTests {
    static let feed = #"[{"id":5,"title":"the integer 5"},{"id":"5","title":"the string 5"},{"id":"a?b","title":"a question"},{"id":9007199254740993,"title":"past a double"}]"#

    @Test func eachKindOfIdOpensItsOwnPost() throws {
        let nginx = try Nginx()
        let root = try #require(nginx.files).root
        for (name, text) in [("kinds.json", Self.feed), ("no-images.json", "[]")] {
            try text.write(toFile: root + "/" + name, atomically: false, encoding: .utf8)
            chmod(root + "/" + name, 0o644)
        }
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/kinds.json", "--images-url", nginx.base + "/no-images.json", "--http-listen", "127.0.0.1:\(port)"])
        let prefetch = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        try #require(prefetch.status == 0, "\(prefetch.stderr)")
        let title = "document.querySelector('#detail-post h2')?.textContent"
        let links = "[...document.querySelectorAll('article.post h2 a')].map(a => [a.textContent, a.getAttribute('href')])"
        let page = try PageCheck.run(
            url: "http://127.0.0.1:\(port)/", artifact: "http-post-kinds",
            until: PageCheck.summary("s.dataset.posts === '4'"),
            actions: [.do("location.hash = document.querySelectorAll('article.post h2 a')[1].getAttribute('href')"),
                      .step("\(title) === 'the string 5'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[0].getAttribute('href')"),
                      .step("\(title) === 'the integer 5'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[2].getAttribute('href')"),
                      .step("\(title) === 'a question'"),
                      .do("location.hash = document.querySelectorAll('article.post h2 a')[3].getAttribute('href')"),
                      .step("\(title) === 'past a double'")],
            eval: [links], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        #expect(page.errors.isEmpty, "the page logged errors: \(page.errors)")
        #expect(page.eval(links) == .array([.array([.string("the integer 5"), .string("#post/5")]),
                                            .array([.string("the string 5"), .string("#post/5?string")]),
                                            .array([.string("a question"), .string("#post/a%3Fb")]),
                                            .array([.string("past a double"), .string("#post/9007199254740993")])]),
                "\(page.eval(links).map { String(decoding: $0.encoded, as: UTF8.self) } ?? "none")")
    }
}
