import Foundation
import Testing
import CacheProtocol
import CachedClient

/// Listings read page by page (issue 34, point 2): `cachectl get posts` and
/// `get images` print every entry of a store larger than a page, or exactly
/// the page `--offset` and `--limit` name; `--json` prints an answer line a
/// page; a listing that changes between pages is never printed as if whole;
/// the Swift library's page sequences. The real binaries, a real origin.
@Suite struct ListingPagesTests {
    /// A bare JSON array of posts 1...count, each title `title N` and padding to `titleBytes`.
    static func feed(_ count: Int, titleBytes: Int = 12, first: Int = 1) -> String {
        let posts = (first..<(first + count)).map { i in
            let title = "post \(i) " + String(repeating: "t", count: max(0, titleBytes - 6 - String(i).count))
            return #"{"userId":\#(i % 10),"id":\#(i),"title":"\#(title)","body":"b"}"#
        }
        return "[" + posts.joined(separator: ",\n") + "]"
    }

    /// A manifest of `count` rows (`list_images` downloads none of them).
    static func manifest(_ count: Int) -> String {
        "[" + (0..<count).map { #"{"url":"img/\#($0).png","description":"row \#($0)"}"# }.joined(separator: ",") + "]"
    }

    /// The first word of each line of a table, as numbers (its ids or rows),
    /// without the head and the count (`counted`: the last line is one).
    static func firstColumn(_ stdout: String, counted: Bool = true) -> [Int] {
        let lines = stdout.split(separator: "\n").dropFirst()
        return lines.dropLast(counted ? 1 : 0).map { Int($0.split(separator: " ").first ?? "") ?? -1 }
    }

    /// Each line of `--json` output as its JSON.
    static func answers(_ stdout: String) throws -> [JSON] {
        try stdout.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
    }

    /// The table's title is the one `list_posts` searches: without a
    /// `title`, a Lemmy post's `name`, a Bluesky post's `record.text`, a
    /// Slack or X post's `text` (they printed "-"), a line break escaped.
    @Test func getPostsShowsTheTitleASearchMatches() throws {
        let origin = try Origin()
        try origin.write("posts.json", #"""
            [{"id":1,"name":"lemmy name"},{"id":2,"record":{"text":"bluesky text"}},{"id":3,"text":"slack\ntext"},
             {"id":4,"title":{"rendered":"wordpress"}},{"id":5,"title":"plain","name":"not this"},{"id":6}]
            """#)
        let daemon = try Daemon(origin: origin)
        let table = try cachectl(["get", "posts"], socket: daemon.socket)
        let titles = table.stdout.split(separator: "\n").dropFirst().dropLast().map { String($0.dropFirst(13)) }
        #expect(titles == ["lemmy name", "bluesky text", #"slack\ntext"#, "wordpress", "plain", "-"], "\(table.stdout)")
        let found = try cachectl(["get", "posts", "--query", "bluesky"], socket: daemon.socket)
        #expect(found.stdout.contains("bluesky text"), "\(found.stdout)")
    }

    /// Ids wider than five characters (Mastodon's, a URL) and a wide user:
    /// the columns widen to the first page's, so every title starts in one
    /// column; an id past the widest column stands out of it.
    @Test func getPostsColumnsFitTheirIds() throws {
        let origin = try Origin()
        let url = "https://example.org/" + String(repeating: "x", count: 60)
        try origin.write("posts.json", #"""
            [{"id":"109372843234","userId":"alice@example.social","title":"one"},{"id":"7","userId":3,"title":"two"},
             {"id":"\#(url)","title":"three"}]
            """#)
        let daemon = try Daemon(origin: origin)
        let table = try cachectl(["get", "posts"], socket: daemon.socket)
        let lines = table.stdout.split(separator: "\n").map(String.init)
        let width = 40 + 2 + "alice@example.social".count + 2
        #expect(lines.first == String(repeating: " ", count: 38) + "ID" + "  " + String(repeating: " ", count: 16) + "USER  TITLE", "\(table.stdout)")
        #expect(lines.dropFirst().prefix(2).map { String($0.dropFirst(width)) } == ["one", "two"], "\(table.stdout)")
        #expect(lines.dropFirst(3).first == url + "  " + String(repeating: " ", count: "alice@example.social".count - 1) + "-  three", "\(table.stdout)")
    }

    /// A terminal draws a CJK character or an emoji two cells wide and a
    /// combining mark in its letter's cell: the columns count cells, not
    /// characters (they misaligned a line by a cell per wide character).
    @Test func getPostsColumnsCountTerminalCells() throws {
        let origin = try Origin()
        try origin.write("posts.json", #"""
            [{"id":"東京","userId":"山田太郎","title":"one"},{"id":"e\u0301","userId":"e\u0301x","title":"two"},
             {"id":7,"userId":"\ud83d\udc69\u200d\ud83d\udc69\u200d\ud83d\udc67","title":"three"}]
            """#)
        let daemon = try Daemon(origin: origin)
        let table = try cachectl(["get", "posts"], socket: daemon.socket)
        #expect(table.status == 0, "\(table.stderr)")
        let lines = table.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "   ID      USER  TITLE", "\(table.stdout)")
        let byTitle = Dictionary(lines.dropFirst().map { ($0.split(separator: " ").last.map(String.init) ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byTitle["one"] == " 東京  山田太郎  one", "\(table.stdout)")
        #expect(byTitle["two"] == "    e\u{301}        e\u{301}x  two", "\(table.stdout)")
        #expect(byTitle["three"] == "    7        \u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}  three", "\(table.stdout)")
    }

    @Test func getPostsPrintsEveryPostOrThePageAsked() throws {
        let origin = try Origin()
        try origin.write("posts.json", Self.feed(3500))
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket

        let all = try cachectl(["get", "posts"], socket: s)
        #expect(all.status == 0, "\(all.stderr)")
        let lines = all.stdout.split(separator: "\n")
        #expect(lines.count == 3502 && lines.first == "   ID  USER  TITLE" && lines.last == "3500 posts", "\(lines.count) lines, \(lines.last ?? "")")
        #expect(Self.firstColumn(all.stdout) == Array(1...3500), "every post once, in order")

        // A page across the walk's pages of 999: exactly it.
        let page = try cachectl(["get", "posts", "--offset", "995", "--limit", "1010"], socket: s)
        #expect(page.status == 0, "\(page.stderr)")
        #expect(Self.firstColumn(page.stdout) == Array(996...2005))
        #expect(page.stdout.hasSuffix("\n1010 posts from offset 995 of 3500\n"), "\(page.stdout.suffix(80))")
        let tail = try cachectl(["get", "posts", "--offset=3490"], socket: s)
        #expect(Self.firstColumn(tail.stdout) == Array(3491...3500) && tail.stdout.hasSuffix("\n10 posts from offset 3490 of 3500\n"))
        let past = try cachectl(["get", "posts", "--offset", "9000", "--limit", "5"], socket: s)
        #expect(past.status == 0 && past.stdout == "   ID  USER  TITLE\n0 posts from offset 9000 of 3500\n", "\(past.stdout)")

        // --json: an answer line a page, together every post once.
        let json = try cachectl(["--json", "get", "posts"], socket: s)
        #expect(json.status == 0, "\(json.stderr)")
        let pages = try Self.answers(json.stdout)
        #expect(pages.map { $0["posts"]?.array?.count ?? -1 } == [999, 999, 999, 503])
        #expect(pages.allSatisfy { $0["ok"] == .bool(true) && $0["total"]?.int == 3500 })
        let posts = pages.flatMap { $0["posts"]?.array ?? [] }
        #expect(posts.map { $0["id"]?.int ?? -1 } == Array(1...3500))
        #expect(pages.flatMap { $0["ids"]?.array ?? [] } == posts.map { $0["id"] ?? .null }, "ids[i] is the id of posts[i]")
        // A page that fits in one request is the one answer line, as before paging.
        let one = try Self.answers(try cachectl(["--json", "get", "posts", "--offset", "10", "--limit", "3"], socket: s).stdout)
        #expect(one.count == 1 && one.first?["ids"] == .array([num(11), num(12), num(13)]), "\(one)")

        // --query pages the matches.
        let matches = (1...3500).filter { "post \($0) ".contains("post 12") }
        let found = try cachectl(["get", "posts", "--query", "post 12"], socket: s)
        #expect(Self.firstColumn(found.stdout) == matches && found.stdout.hasSuffix("\n\(matches.count) posts\n"), "\(found.stdout.suffix(80))")
        let foundPage = try cachectl(["get", "posts", "-q", "post 12", "--offset", "2", "--limit", "3"], socket: s)
        #expect(Self.firstColumn(foundPage.stdout) == Array(matches[2..<5]))

        for (args, says) in [(["get", "posts", "--offset", "-1"], "--offset takes a number from 0 to 2147483647, not \"-1\""),
                             (["get", "posts", "--limit", "x"], "--limit takes a number"), (["get", "posts", "--limit"], "--limit needs a number"),
                             (["get", "post", "1", "--limit", "3"], "--offset and --limit go with get posts and get images")] {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 2 && r.stderr.contains(says), "\(args): \(r.stderr)")
        }
    }

    @Test func getImagesPrintsEveryRowOrThePageAsked() throws {
        let origin = try Origin()
        try origin.write("images/manifest.json", Self.manifest(2600))
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket

        let all = try cachectl(["get", "images"], socket: s)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(Self.firstColumn(all.stdout) == Array(0..<2600))
        #expect(all.stdout.hasPrefix("  ROW  STATE          SIZE  TYPE        URL\n") && all.stdout.hasSuffix("\n0/2600 rows cached\n"))
        let page = try cachectl(["get", "images", "--offset", "998", "--limit", "4"], socket: s)
        #expect(Self.firstColumn(page.stdout) == [998, 999, 1000, 1001] && page.stdout.hasSuffix("\n0/4 rows cached from offset 998 of 2600\n"), "\(page.stdout)")

        let json = try cachectl(["--json", "get", "images"], socket: s)
        #expect(json.status == 0, "\(json.stderr)")
        let pages = try Self.answers(json.stdout)
        #expect(pages.map { $0["images"]?.array?.count ?? -1 } == [999, 999, 602])
        let rows = pages.flatMap { $0["images"]?.array ?? [] }
        #expect(rows.map { $0["row"]?.int ?? -1 } == Array(0..<2600))
        #expect(rows.map { $0["description"]?.string ?? "" } == (0..<2600).map { "row \($0)" })
    }

    /// cachectl writes a page before it asks for the next: with its output
    /// unread (titles of 300 bytes: a page is 300 KB, a pipe holds 64 KiB)
    /// it waits in the first page, the listing changes, then it is read.
    static func listWhileChanging(_ daemon: Daemon, _ change: () throws -> Void) throws -> CLIResult {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.cachectl)
        p.arguments = ["--socket", daemon.socket, "get", "posts"]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Its first page came: it is writing it.
        var ready = pollfd(fd: out.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 20_000) == 1, "cachectl printed nothing")
        try change()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return CLIResult(status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }

    @Test func aListingThatChangesBetweenPagesEndsWithStatus8() throws {
        let origin = try Origin()
        try origin.write("posts.json", Self.feed(3000, titleBytes: 300))
        let daemon = try Daemon(origin: origin)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))

        // The feed moves on: its first two posts gone, two new at its end.
        // The total is the same; the second page would start two posts late.
        let shifted = try Self.listWhileChanging(daemon) { () throws in
            try origin.write("posts.json", Self.feed(3000, titleBytes: 300, first: 3))
            #expect(try daemon.call("prefetch", [("what", .string("posts"))])["posts"]?["removed"]?.int == 2)
        }
        #expect(shifted.status == 8, "\(shifted.stderr)")
        #expect(shifted.stderr.contains("changed while they were read page by page (a refresh or a delete in between): the last of the posts "
                                        + "read is no longer at position 998; 999 of them were read"), "\(shifted.stderr)")
        #expect(Self.firstColumn(shifted.stdout, counted: false) == Array(1...999), "the pages before the change, whole, and no count")

        // A post deleted: the total is not the first page's.
        let deleted = try Self.listWhileChanging(daemon) { () throws in
            #expect(try daemon.call("delete_post", [("id", num(5))])["deleted"] == .bool(true))
        }
        #expect(deleted.status == 8, "\(deleted.stderr)")
        #expect(try ExitStatusTests.manPageExitStatus().contains("8 get posts or get images stopped because the listing changed"))
        #expect(deleted.stderr == "cachectl: the posts changed while they were read page by page (a refresh or a delete in between): "
                + "3000 at first, 2999 now; 999 of them were read; what was printed may miss or repeat posts: list them again\n", "\(deleted.stderr)")
        #expect(Self.firstColumn(deleted.stdout, counted: false) == Array(3...1001))

        // Unchanged, the same store lists whole.
        let whole = try cachectl(["get", "posts"], socket: daemon.socket)
        #expect(whole.status == 0 && Self.firstColumn(whole.stdout) == [3, 4] + Array(6...3002), "\(whole.stderr)")
    }

    @Test func theSwiftClientReadsPagesAsAnAsyncSequence() async throws {
        let origin = try Origin()
        try origin.write("posts.json", Self.feed(2500))
        try origin.write("images/manifest.json", Self.manifest(1500))
        let daemon = try Daemon(origin: origin)
        let cached = CachedClient(socketPath: daemon.socket)

        var sizes: [Int] = [], ids: [PostID] = [], offsets: [Int] = []
        for try await page in cached.postPages() {
            sizes.append(page.items.count)
            offsets.append(page.offset)
            ids += page.items.map(\.id)
            #expect(page.total == 2500)
        }
        #expect(sizes == [999, 999, 502] && offsets == [0, 999, 1998])
        #expect(ids == (1...2500).map { PostID.int(Int64($0)) })
        #expect(try await cached.postPages(pageSize: 1000).reduce(0) { $0 + $1.items.count } == 2500)
        let matches = (1...2500).filter { "post \($0) ".contains("post 2") }
        var found: [PostID] = []
        for try await page in cached.postPages(query: "POST 2", pageSize: 100) { found += page.items.map(\.id) }
        #expect(found == matches.map { PostID.int(Int64($0)) })
        var rows: [Int] = []
        for try await page in cached.imagePages(pageSize: 700) {
            #expect(page.items.count <= 700 && page.total == 1500)
            rows += page.items.map(\.row)
        }
        #expect(rows == Array(0..<1500))

        // A post deleted between two pages: `.changed`, after the pages before it.
        var read = 0
        do {
            for try await page in cached.postPages(pageSize: 1000) {
                read += page.items.count
                if read == 1000 { _ = try await cached.deletePost(id: 2000) }
            }
            Issue.record("no error after a post was deleted between two pages")
        } catch {
            #expect(error.code == .changed && error.message.contains("2500 at first, 2499 now"), "\(error)")
        }
        #expect(read == 1000)
    }

    /// Posts of 1 MiB (`max-object-size` raised): 65 of them are a listing
    /// longer than a client reads in a line. The daemon refuses it, at once
    /// or from a worker, naming offset and limit and what fits; cachectl asks
    /// for that many instead (the library's walk is the same code:
    /// ListingWalkTests). About 10 s here, most of it the daemon's debug
    /// build parsing and storing the 68 MB feed, then cachectl's reading it.
    @Test func aListingLongerThanALineIsRefusedAndWalkedSmaller() throws {
        let origin = try Origin()
        let body = [UInt8](repeating: UInt8(ascii: "b"), count: 1 << 20)
        var feed = Array("[".utf8)
        feed.reserveCapacity(66 << 20)
        for id in 1...65 { feed += Array(#"{"id":\#(id),"title":"big \#(id)","body":""#.utf8) + body + Array(#""},"#.utf8) }
        feed += Array((66...1100).map { #"{"id":\#($0),"title":"small \#($0)"}"# }.joined(separator: ",").utf8) + Array("]".utf8)
        try origin.write("posts.json", bytes: feed)
        let daemon = try Daemon(origin: origin, arguments: ["--max-object-size", "128M"])
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["posts"]?["fetched"]?.int == 1100)

        let client = try daemon.client()
        // 1,100 posts: sized on a worker; 1,000: answered at once. Both refused, the line never built.
        for (limit, tag) in [(nil, 1), (1000, 2)] as [(Int?, Int)] {
            let answer = try client.call("list_posts", (limit.map { [("limit", num($0))] } ?? []) + [("tag", num(tag))])
            #expect(answer["ok"] == .bool(false) && answer["tag"]?.int == tag && answer["error"]?["code"] == .string("bad_request"))
            let message = answer["error"]?["message"]?.string ?? ""
            #expect(message.contains("longer than the \(ProtocolLimits.maxAnswerLine) bytes of an answer line a client reads")
                    && message.contains("ask for fewer posts with offset and limit (from offset 0, at most 64 fit)"), "\(message)")
            #expect(answer["error"]?["max_limit"]?.int == 64)
        }
        #expect(try client.call("list_posts", [("offset", num(65))])["posts"]?.array?.count == 1035, "the connection is usable still")
        #expect(try daemon.call("status")["counters"]?["errors"]?.int == 2, "each refusal counts as an error answer")

        let all = try cachectl(["get", "posts"], socket: daemon.socket)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(Self.firstColumn(all.stdout) == Array(1...1100) && all.stdout.hasSuffix("\n1100 posts\n"))
    }
}
