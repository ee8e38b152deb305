import Foundation
import Testing
import CacheProtocol

/// The page at `/` in headless Chromium (Tests/Fixtures/browser/page_check.py),
/// served by a real daemon whose origin is a real nginx: the DOM shows every
/// post, the image rows as placeholders until a prefetch, then every row's
/// `<img>` loaded, some of them through the page's server-sent events; and
/// the same page with the origin down after a full prefetch. The screenshots
/// and page_check's reports stay in .build/test-artifacts/.
///
/// Chromium missing is a failure naming the package (chromium), not a skip.
/// Serialized: one browser at a time is plenty for a 2-core machine.
@Suite(.serialized) struct HTTPBrowserTests {
    /// Every post and row, with its title and hash, from the page's DOM.
    static let postsJS = "[...document.querySelectorAll('article.post')].map(a => [a.getAttribute('data-id'), a.querySelector('h2').textContent])"
    static let rowsJS = """
        [...document.querySelectorAll('tr[data-row]')].map(tr => { const i = tr.querySelector('img'); \
        return [Number(tr.getAttribute('data-row')), tr.getAttribute('data-hash'), tr.getAttribute('data-filled-by'), \
        i ? i.getAttribute('data-state') : null, i ? i.naturalWidth : 0]; })
        """

    @Test func thePageShowsPlaceholdersThenEveryImageAsAPrefetchArrivesOverEvents() throws {
        let nginx = try Nginx()
        let files = try #require(nginx.files)
        let expected = try ExpectedFeeds(root: files.root)
        try #require(expected.posts.count == 100, "the bundled Examples/origin has 100 posts (it has \(expected.posts.count))")
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                         "--http-listen", "127.0.0.1:\(port)"])
        let posts = try cachectl(["prefetch", "posts"], socket: daemon.socket)
        try #require(posts.status == 0, "cachectl prefetch posts: \(posts.stderr)\n\(daemon.log.suffix(2000))")
        let rows = expected.rows.count
        let before = "s.dataset.posts === '100' && s.dataset.rows === '\(rows)' && s.dataset.placeholders === '\(rows)'"
            + " && s.dataset.loaded === '0' && s.dataset.sse === 'open'"
        let after = "s.dataset.rows === '\(rows)' && s.dataset.loaded === '\(rows)' && s.dataset.placeholders === '0'"
        let prefetch = "timeout 60 \(PageCheck.shellQuoted(Paths.cachectl)) --socket \(PageCheck.shellQuoted(daemon.socket)) prefetch images"
        let page = try PageCheck.run(url: "http://127.0.0.1:\(port)/", artifact: "http-page",
                                     until: PageCheck.summary(before), thenRun: prefetch, until2: PageCheck.summary(after),
                                     eval: [Self.postsJS, Self.rowsJS], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        let events = Int(page.summary["events"]?.string ?? "") ?? -1
        #expect(events > 0, "rows arrived through /events while the page was open: \(page.summaryText)")
        #expect(page.errors.isEmpty, "the page logged errors: \(page.errors)")
        #expect(page.report["then_run"]?["status"]?.int == 0, "\(page.report["then_run"].map { String(decoding: $0.encoded, as: UTF8.self) } ?? "")")
        try expected.check(page, expectEvents: true, daemon: daemon)
        print("[http-browser] \(page.summaryText), \(events) row events; screenshot \(page.screenshot), report \(page.reportPath)")
    }

    @Test func thePageWorksWithTheOriginDownAfterAFullPrefetch() throws {
        let nginx = try Nginx()
        let files = try #require(nginx.files)
        let expected = try ExpectedFeeds(root: files.root)
        let port = try unusedLocalPort()
        let daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                         "--http-listen", "127.0.0.1:\(port)"])
        let full = try cachectl(["prefetch"], socket: daemon.socket)
        try #require(full.status == 0, "cachectl prefetch: \(full.stderr)\n\(daemon.log.suffix(2000))")
        let served = nginx.accessLog.entries().count
        nginx.stop()
        try #require(!nginx.process.isRunning, "nginx stopped")
        let rows = expected.rows.count
        let all = "s.dataset.posts === '\(expected.posts.count)' && s.dataset.rows === '\(rows)' && s.dataset.loaded === '\(rows)'"
            + " && s.dataset.placeholders === '0' && s.dataset.sse === 'open'"
        let page = try PageCheck.run(url: "http://127.0.0.1:\(port)/", artifact: "http-page-origin-down", until: PageCheck.summary(all),
                                     eval: [Self.postsJS, Self.rowsJS], daemon: daemon)
        try #require(page.status == 0, "\(page.failure)")
        #expect(page.errors.isEmpty, "the page logged errors: \(page.errors)")
        #expect(!nginx.process.isRunning)
        try expected.check(page, expectEvents: false, daemon: daemon)
        print("[http-browser] origin down (it had served \(served) requests): \(page.summaryText); screenshot \(page.screenshot), report \(page.reportPath)")
    }
}

/// What the origin copy holds: each post's id and title, each manifest row.
private struct ExpectedFeeds {
    var posts: [(id: String, title: String)]
    var rows: [JSON]

    init(root: String) throws {
        let feed = try JSONParser.parse(Array(Data(contentsOf: URL(fileURLWithPath: root + "/posts.json"))))
        posts = (feed.array ?? []).map { (String($0["id"]?.int ?? -1), $0["title"]?.string ?? "") }
            .sorted { (Int($0.id) ?? 0) < (Int($1.id) ?? 0) }
        rows = try JSONParser.parse(Array(Data(contentsOf: URL(fileURLWithPath: root + "/images/manifest.json")))).array ?? []
    }

    /// The page's posts are the feed's, in id order; each row shows the
    /// image the daemon lists for it (hash), decoded (naturalWidth > 0).
    func check(_ page: PageCheck.Result, expectEvents: Bool, daemon: Daemon) throws {
        #expect(FileManager.default.fileExists(atPath: page.screenshot), "the screenshot \(page.screenshot) was written")
        let shown = (page.eval(HTTPBrowserTests.postsJS)?.array ?? []).map { ($0.array?[0].string ?? "?", $0.array?[1].string ?? "?") }
        #expect(shown.count == posts.count, "posts shown: \(shown.count) of \(posts.count)")
        for (s, p) in zip(shown, posts) where s.0 != p.id || s.1 != p.title {
            Issue.record("the page shows post \(s.0) \"\(s.1)\" where the feed has \(p.id) \"\(p.title)\"")
            break
        }
        let listing = try daemon.call("list_images")["images"]?.array ?? []
        let hashes = Dictionary(listing.map { ($0["row"]?.int ?? -1, $0["hash"]?.string) }, uniquingKeysWith: { a, _ in a })
        let domRows = page.eval(HTTPBrowserTests.rowsJS)?.array ?? []
        #expect(domRows.count == rows.count, "rows shown: \(domRows.count) of \(rows.count)")
        var byEvent = 0
        for (i, r) in domRows.enumerated() {
            let f = r.array ?? []
            guard f.count == 5 else { Issue.record("row \(i): \(r)"); continue }
            let row = f[0].int
            #expect(row == i, "rows in the manifest's order: \(i) shows row \(row)")
            #expect(f[1].string != nil && f[1].string == hashes[row] ?? nil,
                    "row \(row) shows object \(f[1].string ?? "none"), the daemon has \(String(describing: hashes[row] ?? nil))")
            #expect(f[3].string == "loaded" && (f[4].int) > 0, "row \(row)'s image: \(f[3]) naturalWidth \(f[4])")
            if f[2].string == "event" { byEvent += 1 }
        }
        if expectEvents { #expect(byEvent > 0, "some rows were filled by a row event (data-filled-by=event): \(domRows)") }
    }
}

/// One run of page_check.py, its report and screenshot kept in .build/test-artifacts.
enum PageCheck {
    static var script: String { Paths.packageRoot + "/Tests/Fixtures/browser/page_check.py" }
    static var artifacts: String { Paths.packageRoot + "/.build/test-artifacts" }

    /// A condition on #summary's data-* attributes as `s`.
    static func summary(_ condition: String) -> String {
        "(() => { const s = document.getElementById('summary'); return !!s && \(condition); })()"
    }

    struct Result {
        var status: Int32
        var output: String
        var report: JSON
        var screenshot: String
        var reportPath: String
        var daemonLog: String

        var summary: JSON { report["summary"] ?? .null }
        var summaryText: String { String(decoding: summary.encoded, as: UTF8.self) }
        var errors: [JSON] { report["errors"]?.array ?? [] }
        func eval(_ expression: String) -> JSON? { report["eval"]?[expression] }

        var failure: String {
            let what = switch status {
            case 1: "the page failed its condition (or did not open)"
            case 2: "page_check.py's driver failed (Chromium did not start or answer)"
            default: "page_check.py exited with status \(status)"
            }
            return "\(what); report \(reportPath):\n\(output.suffix(6000))\n--- daemon log (end):\n\(daemonLog.suffix(3000))"
        }
    }

    /// A step after the conditions: wait for an expression, or evaluate one once.
    enum Action {
        case step(String)
        case `do`(String)
    }

    /// The viewport: page_check's default, or a phone's (390x844, mobile).
    static let phone = ["--width", "390", "--height", "844", "--mobile"]

    static func run(url: String, artifact: String, until: String, thenRun: String? = nil, until2: String? = nil,
                    actions: [Action] = [], viewport: [String] = [], eval: [String] = [], daemon: Daemon) throws -> Result {
        try requireInstalled("/usr/bin/chromium", package: "chromium")
        try requireInstalled("/usr/bin/python3", package: "python3")
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let png = artifacts + "/\(artifact).png", json = artifacts + "/\(artifact).json"
        for f in [png, json] { try? FileManager.default.removeItem(atPath: f) }
        var args = [script, url, "--until", until, "--timeout", "40", "--startup-timeout", "60",
                    "--screenshot", png, "--report", json, "--chromium", "/usr/bin/chromium"]
        if let thenRun { args += ["--then-run", thenRun] }
        if let until2 { args += ["--until2", until2] }
        for a in actions {
            switch a {
            case .step(let js): args += ["--step", js]
            case .do(let js): args += ["--do", js]
            }
        }
        args += viewport
        for e in eval { args += ["--eval", e] }
        let r = try runProgram("/usr/bin/python3", args)
        let report = (try? JSONParser.parse(Array(Data(contentsOf: URL(fileURLWithPath: json))))) ?? .null
        return Result(status: r.status, output: r.output, report: report, screenshot: png, reportPath: json, daemonLog: daemon.log)
    }

    /// `s` as one word for /bin/sh.
    static func shellQuoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
