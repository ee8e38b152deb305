import Foundation
import Testing
import CacheProtocol

/// The page with more than a page of each list (issue 24), in the same
/// serialized suite as the other browser tests: 250 posts and 120 rows from
/// a real nginx, a daemon with `http-allow-admin`. On a desktop viewport:
/// the empty store's hint and the Prefetch button, a prefetch started from
/// the page, the pagers, a TIFF row that says so, lazy images, the search
/// box, a post's view with its whole body. On a phone's: one list at a
/// time, no image requested until the Images tab is tapped. Screenshots of
/// both stay in .build/test-artifacts/ (http-page-scale*.png). The full
/// scale (50,000 posts) is `make browser-scale` (Tests/python/test_page_scale.py).
extension HTTPBrowserTests {
    static let posts = 250, rows = 120
    /// Posts whose title holds "Needle" (any case): every 40th.
    static let needles = stride(from: 40, through: 250, by: 40).map { $0 }
    static let longBody = (1...40).map { "line \($0) of post 40" }.joined(separator: "\n")

    /// The origin's feed and manifest: rows cycle over the bundled images,
    /// row 3 is a TIFF (browsers draw none: shown as its thumbnail), row 7 a
    /// missing file (a 404, shown as failed with its reason), row 11 bytes
    /// that start as a TIFF and are not one (no thumbnail can be made: said so).
    static func writeOrigin(_ root: String) throws {
        var feed: [JSON] = []
        for i in 1...posts {
            let title = needles.contains(i) ? (i % 80 == 0 ? "NEEDLE post \(i)" : "Needle post \(i)") : "post \(i)"
            feed.append(.object([("userId", .number(String(i % 7 + 1))), ("id", .number(String(i))), ("title", .string(title)),
                                 ("body", .string(i == 40 ? longBody : "body of post \(i)"))]))
        }
        try Data(JSON.array(feed).encoded).write(to: URL(fileURLWithPath: root + "/posts.json"))
        let images = try FileManager.default.contentsOfDirectory(atPath: root + "/images").filter { $0.hasSuffix(".png") }.sorted()
        var manifest: [JSON] = []
        for i in 0..<rows {
            let url = i == 3 ? "scan.tif" : i == 7 ? "missing.png" : i == 11 ? "broken.tif" : images[i % images.count]
            manifest.append(.object([("url", .string(url)), ("description", .string("row \(i)"))]))
        }
        try Data(JSON.array(manifest).encoded).write(to: URL(fileURLWithPath: root + "/images/manifest.json"))
        try FileManager.default.copyItem(atPath: Paths.packageRoot + "/Tests/Fixtures/images/sample.tiff", toPath: root + "/images/scan.tif")
        try Data([0x49, 0x49, 0x2A, 0x00] + [UInt8](repeating: 0, count: 60)).write(to: URL(fileURLWithPath: root + "/images/broken.tif"))
    }

    static func s(_ condition: String) -> String { PageCheck.summary(condition) }
    static func js(_ condition: String) -> String { "(() => { const $ = (i) => document.getElementById(i); return \(condition); })()" }

    @Test func thePagePagesSearchesShowsAPostAndPrefetchesFromAnEmptyStore() throws {
        let nginx = try Nginx()
        let root = try #require(nginx.files).root
        // The feed is empty at first: a first listing fetches it (no posts),
        // then the origin gets its 250 posts, which only a prefetch brings.
        try Data("[]".utf8).write(to: URL(fileURLWithPath: root + "/posts.json"))
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                         "--http-listen", "127.0.0.1:\(port)", "--http-allow-admin", "true"])
        #expect(try daemon.call("list_posts")["total"]?.int == 0)
        try Self.writeOrigin(root)
        let empty = Self.s("s.dataset.postsTotal === '0' && s.dataset.rowsTotal === '\(Self.rows)' && s.dataset.rows === '50'")
            + " && " + Self.js("!$('posts-empty').hidden && $('posts-empty').textContent.includes('cachectl prefetch') && !$('prefetch').hidden")
        let firstRow = "document.querySelector('tr[data-row]')"
        let actions: [PageCheck.Action] = [
            .do("document.getElementById('prefetch').click()"),
            .step(Self.s("s.dataset.postsTotal === '250' && s.dataset.posts === '100' && s.dataset.unsupported === '1' && Number(s.dataset.loaded) >= 1")
                  + " && " + Self.js("$('status').textContent.startsWith('prefetched') && $('posts-empty').hidden")),
            // Row 3's TIFF is shown as its thumbnail (a webp variant), linking to the original.
            .step(Self.js("document.querySelector('tr[data-row=\"3\"] img').dataset.state === 'loaded'"
                          + " && document.querySelector('tr[data-row=\"3\"] img').currentSrc.includes('/images/3?w=')"
                          + " && document.querySelector('tr[data-row=\"3\"] a').getAttribute('href').startsWith('/objects/')"
                          + " && document.querySelector('tr[data-row=\"11\"]').textContent.includes('image/tiff: browsers do not show this type')"
                          // Row 7 is a 404: it says so, with the reason (last_error), not "not cached yet".
                          + " && document.querySelector('tr[data-row=\"7\"] [data-state]').dataset.state === 'failed'"
                          + " && document.querySelector('tr[data-row=\"7\"]').textContent.includes('failed: HTTP 404')"
                          + " && [...document.querySelectorAll('tr[data-row] img')].every(i => i.loading === 'lazy')")),
            .do("document.querySelector('#posts-pager [data-go=next]').click()"),
            .step(Self.s("s.dataset.postsOffset === '100'") + " && document.querySelector('article.post').dataset.id === '101'"),
            .do("document.querySelector('#posts-pager [data-go=last]').click()"),
            .step(Self.s("s.dataset.postsOffset === '200' && s.dataset.posts === '50'")),
            .do("const i = document.getElementById('search'); i.value = 'needle'; i.dispatchEvent(new Event('input'))"),
            .step(Self.s("s.dataset.query === 'needle' && s.dataset.postsTotal === '\(Self.needles.count)' && s.dataset.posts === '\(Self.needles.count)' && s.dataset.postsOffset === '0'")),
            .do("document.querySelector('article.post[data-id=\"40\"] h2 a').click()"),
            .step(Self.s("s.dataset.view === 'detail'") + " && " + Self.js("$('detail-post').dataset.id === '40' && $('detail-post').querySelector('.body').textContent.split('\\n').length === 40")),
            .do("location.hash = '#posts'"),
            .step(Self.s("s.dataset.view === 'list' && s.dataset.posts === '\(Self.needles.count)'")),
            .do("document.querySelector('#images-pager [data-go=next]').click()"),
            .step(Self.s("s.dataset.rowsOffset === '50' && s.dataset.rows === '50'") + " && \(firstRow).dataset.row === '50'"),
        ]
        let page = try PageCheck.run(url: "http://127.0.0.1:\(port)/", artifact: "http-page-scale", until: empty, actions: actions,
                                     eval: ["document.getElementById('detail-post').textContent", "document.title"], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        // Row 11's thumbnail is refused (502): the browser logs it, the page says why in the row.
        let errors = page.errors.filter { !($0["url"]?.string?.contains("/images/11?w=") ?? false) }
        #expect(errors.isEmpty, "the page logged errors: \(errors)")
        let listed = try daemon.call("list_posts", [("query", .string("NEEDLE")), ("limit", .number("2"))])
        #expect(listed["total"]?.int == Self.needles.count && listed["posts"]?.array?.count == 2, "list_posts query: \(listed)")
        try phoneShowsOneListAtATime(port: port, daemon: daemon)
    }

    /// The same store on a phone: posts first, the images section hidden
    /// and none of its images requested until the Images tab is tapped.
    private func phoneShowsOneListAtATime(port: Int, daemon: Daemon) throws {
        let objects = "performance.getEntriesByType('resource').filter(e => e.name.includes('/images/') && e.name.includes('?w=')).length"
        let hidden = { (id: String) in "(getComputedStyle(document.getElementById('\(id)')).display === 'none')" }
        let start = Self.s("s.dataset.posts === '100' && s.dataset.rows === '50' && s.dataset.tab === 'posts'")
            + " && \(hidden("images")) && !\(hidden("posts")) && \(objects) === 0"
        let page = try PageCheck.run(url: "http://127.0.0.1:\(port)/", artifact: "http-page-scale-phone", until: start, actions: [
            .do("document.querySelector('button[data-tab=images]').click()"),
            .step(Self.s("s.dataset.tab === 'images' && Number(s.dataset.loaded) >= 3") + " && \(hidden("posts")) && !\(hidden("images"))"),
        ], viewport: PageCheck.phone, eval: [objects], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        let errors = page.errors.filter { !($0["url"]?.string?.contains("/images/11?w=") ?? false) }
        #expect(errors.isEmpty, "the page logged errors: \(errors)")
        let requested = page.eval(objects)?.int ?? -1
        #expect(requested > 0 && requested < 50, "images requested on the phone's first screen of rows: \(requested) (lazy: fewer than the page's 50)")
        print("[http-browser] phone: \(page.summaryText); \(requested) images requested; screenshot \(page.screenshot)")
    }
}

extension HTTPBrowserTests {
    /// String ids that need encoding (`posts-id = /slug`: a slash, a space,
    /// `?`, `#`, `%` and non-ASCII), WordPress's `{"rendered": ...}` title
    /// and body: the list shows each id and the title's text, and a post's
    /// view fetches `/posts/{id}` with the id percent-encoded.
    @Test func aStringIDWithSlashesAndARenderedTitleOpenInThePostView() throws {
        let nginx = try Nginx()
        let root = try #require(nginx.files).root
        let slugs = ["2024/a b?c#d", "100% é", "plain"]
        let feed = JSON.array(slugs.enumerated().map { i, slug in
            .object([("slug", .string(slug)), ("author", .number(String(i + 3))),
                     ("title", .object([("rendered", .string("Post &amp; <em>\(i)</em>"))])),
                     ("content", .object([("rendered", .string("<p>first</p><p>second \(i)</p>"))]))])
        })
        try Data(feed.encoded).write(to: URL(fileURLWithPath: root + "/posts.json"))
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--posts-id", "/slug",
                                                         "--images-url", nginx.manifestURL, "--http-listen", "127.0.0.1:\(port)"])
        let r = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        try #require(r.status == 0, "\(r.stderr)")
        let ids = "[...document.querySelectorAll('article.post')].map(a => [a.dataset.id, a.querySelector('h2').textContent, a.querySelector('.meta').textContent])"
        let listed = Self.s("s.dataset.posts === '3'")
        let open = "document.querySelector('article.post[data-id=\"100% é\"] h2 a').click()"
        let shown = Self.s("s.dataset.view === 'detail'") + " && document.getElementById('detail-post').dataset.id === '100% é'"
            + " && document.querySelector('#detail-post h2').textContent === 'Post & 1'"
        let page = try PageCheck.run(url: "http://127.0.0.1:\(port)/", artifact: "http-page-string-ids", until: listed,
                                     actions: [.do(open), .step(shown)],
                                     eval: [ids, "location.hash", "document.querySelector('#detail-post .body').textContent"], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        #expect(page.errors.isEmpty, "the page logged errors: \(page.errors)")
        let rows = (page.eval(ids)?.array ?? []).map { ($0.array ?? []).map { $0.string ?? "?" } }
        #expect(rows == slugs.enumerated().map { i, slug in [slug, "Post & \(i)", "#\(slug) · user \(i + 3)"] }, "\(rows)")
        #expect(page.eval("location.hash")?.string == "#post/100%25%20%C3%A9")
        #expect(page.eval("document.querySelector('#detail-post .body').textContent")?.string == "first\nsecond 1", "a line after each block")
    }
}
