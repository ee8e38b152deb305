import Foundation
import Testing
import CacheProtocol

/// A prefetch of both feeds in which one fails still reports the other
/// (docs/protocol.md, "prefetch"; issue 24: a full disk took the posts and
/// cachectl printed one internal error, no summary). The answer stays an
/// error, as before, for clients that read only `ok` and `error`.
@Suite struct PartialPrefetchTests {
    @Test func aFailedPostsFeedKeepsTheImagesSummary() throws {
        let origin = try Origin()
        try FileManager.default.removeItem(atPath: origin.root + "/posts.json")
        let scratch = Scratch()
        let httpSocket = scratch.path + "/http.sock"
        let daemon = try Daemon(origin: origin, arguments: ["--http-listen", httpSocket, "--http-allow-admin"], scratch: scratch)
        let r = try daemon.call("prefetch")
        #expect(r["ok"] == .bool(false) && r["error"]?["code"] == .string("upstream"), "\(r)")
        #expect(r["error"]?["message"]?.string?.contains("posts-url \(origin.postsURL)") == true, "\(r)")
        #expect(r["posts"] == .null && r["images"]?["downloaded"]?.int == 16 && r["failures"] == .array([]), "\(r)")

        // cachectl: the summary on stdout, then the error; the origin's: exit 6.
        let text = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(text.status == 6, "\(text.stderr)")
        #expect(text.stdout == "images: 0 downloaded, 16 already cached, 0 revalidated (0 changed, 0 unchanged), 0 failed, 0 skipped; 0 transfers, 0 B\n", "\(text.stdout)")
        #expect(text.stderr.hasPrefix("cachectl: posts-url \(origin.postsURL): HTTP 404") && text.stderr.hasSuffix(" (upstream)\n"), "\(text.stderr)")
        let json = try cachectl(["--json", "prefetch"], socket: daemon.socket)
        #expect(json.status == 6)
        #expect(try JSONParser.parse(Array(json.stdout.utf8))["images"]?["cached"]?.int == 16, "\(json.stdout)")

        // Over HTTP, the same answer line with the error's status.
        let http = try RawHTTP(path: httpSocket)
        try http.send(httpGet("/prefetch", method: "POST", ["Content-Length: 0"]))
        let answer = try http.response()
        #expect(answer.status == 502 && answer.errorCode == "upstream", "\(answer.status) \(answer.text)")
        #expect(try JSONParser.parse(answer.body)["images"]?["cached"]?.int == 16, "\(answer.text)")

        // Asked for alone, a failed feed is the error it always was.
        let alone = try daemon.call("prefetch", [("what", .string("posts"))])
        #expect(alone["ok"] == .bool(false) && alone["images"] == nil && alone["posts"] == nil, "\(alone)")
    }

    @Test func aFailedManifestKeepsThePostsSummary() throws {
        let origin = try Origin()
        try FileManager.default.removeItem(atPath: origin.root + "/images/manifest.json")
        let daemon = try Daemon(origin: origin)
        let text = try cachectl(["prefetch"], socket: daemon.socket)
        #expect(text.status == 6, "\(text.stderr)")
        #expect(text.stdout == "posts:  100 fetched, 0 unchanged, 0 removed, 0 invalid\n", "\(text.stdout)")
        #expect(text.stderr.hasPrefix("cachectl: images-url \(origin.manifestURL): HTTP 404"), "\(text.stderr)")
        #expect(try daemon.call("list_posts")["total"]?.int == 100, "the posts were stored")
        // Both streams into one pipe: the summary, then the error.
        let both = try runProgram("/bin/sh", ["-c", "exec \"$0\" --socket \"$1\" prefetch 2>&1", Paths.cachectl, daemon.socket])
        #expect(both.status == 6)
        #expect(both.output.hasPrefix("posts:  0 fetched, 100 unchanged, 0 removed, 0 invalid\ncachectl: images-url "), "\(both.output)")
    }
}
