import Testing
import Foundation
import CacheProtocol
import CacheSystem

/// Paged feeds with string ids, against a real nginx (ETags, `Link` headers
/// from `add_header`): docs/protocol.md, "Feeds" and "Post ids".
@Suite(.serialized) struct FeedPagesTests {
    /// A JSON:API-shaped feed of three pages, linked by `links.next`
    /// (relative, then root-relative, then null), with string ids of the
    /// awkward kinds: a URL, a decimal string, `..`, a leading `-`, Unicode.
    static let pages = [
        "feed/p1.json": #"{"data":[{"id":"https://ex.org/a/b","title":"A"},{"id":"109","title":"M"}],"links":{"next":"p2.json"}}"#,
        "feed/p2.json": #"{"data":[{"id":"..","title":"dots"},{"id":"109","title":"repeated"}],"links":{"next":"/feed/p3.json"}}"#,
        "feed/p3.json": #"{"data":[{"id":"-x/é","title":"last"}],"links":{"next":null}}"#,
    ]

    func serve(_ files: [String: String], in nginx: Nginx) throws {
        for (path, text) in files {
            let full = nginx.files!.root + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: full, atomically: false, encoding: .utf8)
            // Dated in the past: an edit later gets a newer Last-Modified and ETag.
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-3600)], ofItemAtPath: full)
            chmod(full, 0o644)
        }
    }

    func prefetchPosts(_ d: Daemon) throws -> JSON { try d.call("prefetch", [("what", .string("posts"))]) }

    func ids(_ d: Daemon) throws -> [JSON] { try d.call("list_posts")["ids"]?.array ?? [] }

    /// The feed-page requests nginx logged after `offset`: path and status.
    func pageRequests(_ nginx: Nginx, after offset: Int, count: Int) -> [String] {
        nginx.accessLog.entries(after: offset, atLeast: count).filter { $0.path.hasPrefix("/feed/") || $0.path.hasPrefix("/gh/") }
            .map { "\($0.path) \($0.status)" }
    }

    @Test func pagesWithStringIdsAreCachedRefreshedPageByPageAndSurviveARestart() throws {
        let nginx = try Nginx()
        try serve(Self.pages, in: nginx)
        let port = try unusedLocalPort()
        let scratch = Scratch()
        let args = ["--posts-url", nginx.base + "/feed/p1.json", "--posts-items", "/data", "--posts-next", "/links/next",
                    "--http-listen", "127.0.0.1:\(port)"]
        var d = try Daemon(origin: nil, arguments: args, scratch: scratch)
        let first = try prefetchPosts(d)
        #expect(first["posts"]?["fetched"]?.integer == 4, "\(first)")
        #expect(first["posts"]?["invalid"]?.integer == 1, "the repeated id 109 on page 2")
        #expect(pageRequests(nginx, after: 0, count: 3) == ["/feed/p1.json 200", "/feed/p2.json 200", "/feed/p3.json 200"])
        let order: [JSON] = [.string("https://ex.org/a/b"), .string("109"), .string(".."), .string("-x/é")]
        #expect(try ids(d) == order, "string ids: the feed's order")

        // Each id kind by get_post; the integer 109 finds the string "109".
        #expect(try d.call("get_post", [("id", .string("109"))])["post"]?["title"]?.string == "M")
        let byInt = try d.call("get_post", [("id", .number("109"))])
        #expect(byInt["post"]?["title"]?.string == "M")
        #expect(byInt["id"] == .string("109"), "the answer names the id found")
        #expect(try d.call("get_post", [("id", .string("https://ex.org/a/b"))])["post"] == .object([("id", .string("https://ex.org/a/b")), ("title", .string("A"))]))
        #expect(try d.call("get_post", [("id", .number("110"))])["error"]?["code"]?.string == "not_found")

        // Every post file is beneath posts/, one each.
        let files = try FileManager.default.contentsOfDirectory(atPath: d.store + "/posts")
        #expect(files.count == 4, "\(files)")

        // HTTP: the percent-decoded segment, slashes and dots included.
        #expect(httpBody(port, "/posts/https%3A%2F%2Fex.org%2Fa%2Fb")?["title"]?.string == "A")
        #expect(httpBody(port, "/posts/%2E%2E")?["title"]?.string == "dots")
        #expect(httpBody(port, "/posts/-x%2F%C3%A9")?["title"]?.string == "last")
        // The string id "109" through its integer spelling, and by kind; a kind
        // that cannot be, or is no kind, is a bad request.
        #expect(httpBody(port, "/posts/109")?["title"]?.string == "M")
        #expect(httpBody(port, "/posts/109?kind=string")?["title"]?.string == "M")
        #expect(httpBody(port, "/posts/109?kind=integer")?["title"]?.string == "M", "no integer 109: the string of its spelling")
        #expect((try? SimpleHTTP.get(port: port, path: "/posts/dots?kind=integer"))?.status == 400)
        #expect((try? SimpleHTTP.get(port: port, path: "/posts/109?kind=float"))?.status == 400)

        // Nothing changed: every page answers 304 and the log gains nothing.
        let logSize = try size(d.store + "/index.log")
        var seen = nginx.accessLog.entries().count
        let second = try prefetchPosts(d)
        #expect(second["posts"]?["unchanged"]?.integer == 4, "\(second)")
        #expect(pageRequests(nginx, after: seen, count: 3) == ["/feed/p1.json 304", "/feed/p2.json 304", "/feed/p3.json 304"])
        #expect(try size(d.store + "/index.log") == logSize, "a refresh where every page answered 304 writes nothing")

        // An edit on page 2 is picked up; pages 1 and 3 stand as stored.
        try nginx.files!.edit("feed/p2.json", replacing: #""dots""#, with: #""dots, edited""#)
        seen = nginx.accessLog.entries().count
        let third = try prefetchPosts(d)
        #expect(third["posts"]?["fetched"]?.integer == 1, "\(third)")
        #expect(pageRequests(nginx, after: seen, count: 3) == ["/feed/p1.json 304", "/feed/p2.json 200", "/feed/p3.json 304"])
        #expect(try d.call("get_post", [("id", .string(".."))])["post"]?["title"]?.string == "dots, edited")
        #expect(try ids(d) == order)

        // A restart: the same posts, order and pages; the next refresh is all 304.
        #expect(d.stop() == 0)
        d = try Daemon(origin: nil, arguments: args, scratch: scratch)
        #expect(try ids(d) == order)
        #expect(try d.call("get_post", [("id", .string("-x/é"))])["post"]?["title"]?.string == "last")
        seen = nginx.accessLog.entries().count
        _ = try prefetchPosts(d)
        #expect(pageRequests(nginx, after: seen, count: 3) == ["/feed/p1.json 304", "/feed/p2.json 304", "/feed/p3.json 304"])
    }

    /// GitHub-style: integer ids newest first, pages linked by `Link` headers only.
    @Test func linkHeadersArePagedAndIntegerIdsListAscending() throws {
        let extra = """
        location = /gh/1.json { add_header Link '<http://127.0.0.1:$server_port/gh/2.json>; rel="next", <http://127.0.0.1:$server_port/gh/2.json>; rel="last"' always; }
        location = /gh/2.json { add_header Link '</gh/1.json>; rel="first", </gh/1.json>; rel="prev"' always; }
        """
        let nginx = try Nginx(extra: extra)
        try serve(["gh/1.json": #"[{"id":30,"title":"c"},{"id":20,"title":"b"}]"#, "gh/2.json": #"[{"id":10,"title":"a"}]"#], in: nginx)
        let d = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/gh/1.json"])
        #expect(try prefetchPosts(d)["posts"]?["fetched"]?.integer == 3)
        #expect(try ids(d) == [.number("10"), .number("20"), .number("30")], "integer ids: ascending, as always")
        let seen = nginx.accessLog.entries().count
        _ = try prefetchPosts(d)
        #expect(pageRequests(nginx, after: seen, count: 2) == ["/gh/1.json 304", "/gh/2.json 304"], "a 304 keeps its page's next link")
    }

    /// A loop, too many pages and items that are not there each fail the
    /// refresh with `upstream`, and the posts stay as they were.
    @Test func aLoopTooManyPagesOrMissingItemsFailAndChangeNothing() throws {
        let nginx = try Nginx()
        try serve(Self.pages, in: nginx)
        let base = ["--posts-url", nginx.base + "/feed/p1.json", "--posts-items", "/data", "--posts-next", "/links/next"]
        let d = try Daemon(origin: nil, arguments: base)
        _ = try prefetchPosts(d)
        let before = try d.call("list_posts")

        try nginx.files!.edit("feed/p3.json", replacing: #""next":null"#, with: #""next":"p1.json""#)
        let loop = try cachectl(["prefetch", "posts"], socket: d.socket)
        #expect(loop.status != 0)
        #expect(loop.stderr.contains("the pages loop: page 3 links to \(nginx.base)/feed/p1.json, which was already fetched"), "\(loop.stderr)")
        #expect(try d.call("list_posts") == before)

        let few = try Daemon(origin: nil, arguments: base + ["--posts-max-pages", "2"])
        let tooMany = try cachectl(["prefetch", "posts"], socket: few.socket)
        #expect(tooMany.stderr.contains("page 3 \(nginx.base)/feed/p3.json: more than posts-max-pages 2 pages; page 3 holds 1 item"), "\(tooMany.stderr)")
        // Nothing was stored: the first listing fetches the posts again, and fails alike.
        let listed = try few.call("list_posts")
        #expect(listed["error"]?["code"] == .string("upstream") && listed["error"]?["message"]?.string?.contains("more than posts-max-pages 2 pages") == true, "\(listed)")

        let wrong = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/feed/p1.json", "--posts-items", "/links"])
        let r = try wrong.call("prefetch", [("what", .string("posts"))])
        #expect(r["error"]?["code"]?.string == "upstream")
        #expect(r["error"]?["message"]?.string?.contains("posts-items /links is an object, not an array") == true, "\(r)")
    }

    /// The API renames its id (or `posts-id` is wrong): a refresh whose
    /// pages hold items but not one with an id fails, naming the first such
    /// page and the settings, and the posts stay; before, every post was
    /// removed and the prefetch succeeded ("20 removed, 20 invalid", exit 0).
    @Test func aFeedWhoseItemsAllLackTheIdFailsAndChangesNothing() throws {
        let nginx = try Nginx()
        try serve(Self.pages, in: nginx)
        let d = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/feed/p1.json", "--posts-items", "/data", "--posts-next", "/links/next"])
        _ = try prefetchPosts(d)
        let before = try d.call("list_posts")
        #expect(before["ids"]?.array?.count == 4, "\(before)")

        for (page, ids) in [("feed/p1.json", [#"https://ex.org/a/b"#, "109"]), ("feed/p2.json", ["..", "109"]), ("feed/p3.json", ["-x/é"])] {
            for id in ids { try nginx.files!.edit(page, replacing: #"{"id":"\#(id)""#, with: #"{"uuid":"\#(id)""#) }
        }
        let renamed = try cachectl(["prefetch", "posts"], socket: d.socket)
        #expect(renamed.status == 6, "\(renamed)")
        #expect(renamed.stderr.contains("page 1 \(nginx.base)/feed/p1.json"), "\(renamed.stderr)")
        #expect(renamed.stderr.contains(#"not one of the 5 items read is a post that can be kept (here element 0 has no "/id"); check posts-id and posts-item"#),
                "\(renamed.stderr)")
        #expect(try d.call("list_posts") == before)
        let status = try cachectl(["status"], socket: d.socket)
        #expect(status.stdout.contains("not one of the 5 items read"), "\(status.stdout)")

        // A page of only items that are no post, beside pages of posts (a
        // page of tombstones), is skipped and counted, not a failure.
        try nginx.files!.edit("feed/p1.json", replacing: #"{"uuid":"https://ex.org/a/b""#, with: #"{"id":"https://ex.org/a/b""#)
        try nginx.files!.edit("feed/p1.json", replacing: #"{"uuid":"109""#, with: #"{"id":"109""#)
        let partly = try prefetchPosts(d)
        #expect(partly["posts"]?["invalid"]?.integer == 3, "\(partly)")
    }

    /// A `Link: rel="next"` back to the first page, and a later page that is
    /// a 404, each fail the refresh naming the page, and the posts stay as
    /// the last good refresh left them (moved here from the feed shapes' Python).
    @Test func aLinkHeaderLoopOrALaterPageThatFailsChangesNothing() throws {
        let extra = """
        location = /gl/1.json { add_header Link '</gl/2.json>; rel="next"' always; }
        location = /gl/2.json { add_header Link '</gl/1.json>; rel="next"' always; }
        location = /gp/1.json { add_header Link '</gp/2.json>; rel="next"' always; }
        """
        let nginx = try Nginx(extra: extra)
        try serve(["gl/1.json": #"[{"id":1,"title":"a"}]"#, "gl/2.json": #"[{"id":2,"title":"b"}]"#,
                   "gp/1.json": #"[{"id":3,"title":"c"}]"#, "gp/2.json": #"[{"id":4,"title":"d"}]"#], in: nginx)

        let loop = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/gl/1.json"])
        let looped = try cachectl(["prefetch", "posts"], socket: loop.socket)
        #expect(looped.status != 0)
        #expect(looped.stderr.contains("the pages loop: page 2 links to \(nginx.base)/gl/1.json, which was already fetched"), "\(looped.stderr)")
        #expect(try loop.call("list_posts", [("limit", .number("0"))])["error"]?["code"]?.string == "upstream", "nothing stored")

        let d = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/gp/1.json"])
        #expect(try prefetchPosts(d)["posts"]?["fetched"]?.integer == 2)
        let before = try d.call("list_posts")
        // Page 1 changes and page 2 goes: the walk fails, and page 1's new
        // answer is not stored on its own (a refresh is one transaction).
        try nginx.files!.edit("gp/1.json", replacing: #""title":"c""#, with: #""title":"c, edited""#)
        try FileManager.default.removeItem(atPath: nginx.files!.root + "/gp/2.json")
        let failed = try prefetchPosts(d)
        #expect(failed["error"]?["code"]?.string == "upstream", "\(failed)")
        #expect(failed["error"]?["message"]?.string?.contains("\(nginx.base)/gp/2.json") == true, "the page is named: \(failed)")
        #expect(failed["error"]?["message"]?.string?.contains("404") == true, "\(failed)")
        #expect(try d.call("list_posts") == before, "page 1's new answer alone changes nothing")
        #expect(try d.call("get_post", [("id", .number("3"))])["post"]?["title"]?.string == "c")
    }

    /// The manifest's own paging settings through the daemon: a JSON:API
    /// manifest (`images-items /data`, `images-next /links/next`, each
    /// image's URL and description deeper in its item), rows the positions
    /// of the whole list; every page revalidated with its own ETag (all
    /// 304: nothing written); `images-max-pages` and a pointer to no array
    /// fail the refresh and change nothing.
    @Test func aPagedManifestUsesItsOwnSettings() throws {
        let nginx = try Nginx()
        let pages = [
            "man/m1.json": #"{"data":[{"attributes":{"src":"/images/01-sunrise.png","alt":"first"}},{"attributes":{"src":"/images/02-ocean.png","alt":"second"}}],"links":{"next":"m2.json"}}"#,
            "man/m2.json": #"{"data":[{"attributes":{"src":"../images/03-forest.png","alt":"third"}}],"links":{"next":null}}"#,
        ]
        try serve(pages, in: nginx)
        let base = ["--images-url", nginx.base + "/man/m1.json", "--images-items", "/data", "--images-next", "/links/next",
                    "--images-url-field", "/attributes/src", "--images-description-field", "/attributes/alt"]
        let scratch = Scratch()
        let d = try Daemon(origin: nil, arguments: base, scratch: scratch)
        let first = try d.call("prefetch", [("what", .string("images"))])
        #expect(first["images"]?["downloaded"]?.int == 3, "\(first)")
        let rows = try d.call("list_images")["images"]?.array ?? []
        #expect(rows.map { $0["description"]?.string ?? "" } == ["first", "second", "third"])
        #expect(rows.map { $0["url"]?.string ?? "" } == ["01-sunrise.png", "02-ocean.png", "03-forest.png"].map { nginx.base + "/images/" + $0 })
        let imageFile = try nginx.files!.bytes("images/03-forest.png")
        #expect(try FileSystem.read(try #require(rows[2]["path"]?.string)) == imageFile, "row 2 is page 2's first item")
        let size = try FileSystem.status(scratch.path + "/store/index.log")?.size
        let offset = nginx.accessLog.entries(after: 0, atLeast: 0).count
        _ = try d.call("prefetch", [("what", .string("images"))])
        let again = nginx.accessLog.entries(after: offset, atLeast: 2).filter { $0.path.hasPrefix("/man/") }.map { "\($0.path) \($0.status)" }
        #expect(again == ["/man/m1.json 304", "/man/m2.json 304"], "each page with its own ETag: \(again)")
        #expect(try FileSystem.status(scratch.path + "/store/index.log")?.size == size, "all 304: nothing written")

        let few = try Daemon(origin: nil, arguments: base + ["--images-max-pages", "1"])
        let tooMany = try few.call("prefetch", [("what", .string("images"))])
        #expect(tooMany["error"]?["message"]?.string?.contains("more than images-max-pages 1 pages") == true, "\(tooMany)")
        #expect(try few.call("status")["images"]?.int == 0, "nothing of the manifest was stored")
        let wrong = try Daemon(origin: nil, arguments: base + ["--images-items", "/links"])
        let r = try wrong.call("prefetch", [("what", .string("images"))])
        #expect(r["error"]?["message"]?.string?.contains("images-items /links is an object, not an array") == true, "\(r)")
    }

    /// A JSON Feed whose items name images: the same URL is the posts feed
    /// and the manifest, and one prefetch fetches it once.
    @Test func aJSONFeedIsPostsAndManifestFetchedOnce() throws {
        let nginx = try Nginx()
        let feed = """
        {"version":"https://jsonfeed.org/version/1.1","title":"t","items":[
         {"id":"https://ex.org/1","title":"one","image":"images/01-sunrise.png"},
         {"id":"https://ex.org/2","title":"two","image":"images/02-ocean.png"}]}
        """
        try serve(["feed.json": feed], in: nginx)
        let url = nginx.base + "/feed.json"
        let d = try Daemon(origin: nil, arguments: ["--posts-url", url, "--images-url", url, "--images-url-field", "/image",
                                                    "--images-description-field", "/title"])
        let r = try d.call("prefetch")
        #expect(r["posts"]?["fetched"]?.integer == 2, "\(r)")
        #expect(r["images"]?["downloaded"]?.integer == 2, "\(r)")
        let feedRequests = nginx.accessLog.entries(after: 0, atLeast: 3).filter { $0.path == "/feed.json" }
        #expect(feedRequests.count == 1, "\(feedRequests.map(\.description))")
        #expect(try d.call("get_image", [("row", .number("1"))])["image"]?["description"]?.string == "two")
    }

    /// Oldest-first, paged by `Link` (GitHub style): page 1 fills up and a
    /// page 2 appears; page 1 answers 304 with the new `Link`, which is followed.
    @Test func aNewPageNamedByThe304sLinkHeaderIsFetched() throws {
        let extra = """
        location = /gh/1.json { if (-f $document_root/gh/2.json) { add_header Link '</gh/2.json>; rel="next"' always; } }
        """
        let nginx = try Nginx(extra: extra)
        try serve(["gh/1.json": #"[{"id":1,"title":"a"},{"id":2,"title":"b"}]"#], in: nginx)
        let d = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/gh/1.json"])
        #expect(try prefetchPosts(d)["posts"]?["fetched"]?.integer == 2)
        try serve(["gh/2.json": #"[{"id":3,"title":"c"}]"#], in: nginx)
        let seen = nginx.accessLog.entries().count
        _ = try prefetchPosts(d)
        #expect(pageRequests(nginx, after: seen, count: 2) == ["/gh/1.json 304", "/gh/2.json 200"])
        #expect(try ids(d) == [.number("1"), .number("2"), .number("3")])
    }

    /// `posts-url` redirects: a relative next link resolves against the URL
    /// that answered, as a browser resolves it.
    @Test func aRelativeNextLinkAfterARedirectResolvesAgainstTheURLThatAnswered() throws {
        let nginx = try Nginx(extra: "location = /old.json { return 301 /v2/p1.json; }")
        try serve(["v2/p1.json": #"{"data":[{"id":"a"}],"next":"p2.json"}"#, "v2/p2.json": #"{"data":[{"id":"b"}],"next":null}"#], in: nginx)
        let d = try Daemon(origin: nil, arguments: ["--posts-url", nginx.base + "/old.json", "--posts-items", "/data", "--posts-next", "/next"])
        let r = try prefetchPosts(d)
        #expect(r["posts"]?["fetched"]?.integer == 2, "\(r)")
    }

    private func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
    }

    private func httpBody(_ port: Int, _ path: String) -> JSON? {
        guard let a = try? SimpleHTTP.get(port: port, path: path), a.status == 200 else { return nil }
        return try? JSONParser.parse(a.body)
    }
}
