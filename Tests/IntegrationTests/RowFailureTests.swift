import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Issue 24, item 2: a row that failed says why (`last_error` in
/// `list_images`, `get_image`, `cachectl get images`), is retried at the
/// next prefetch and then backs off; `status` and `/metrics` tell the last
/// prefetch. Against a real nginx, counted from its access log.
@Suite struct RowFailureTests {
    /// A manifest of one good image named by two rows, then a 404, an HTML page, a body over
    /// max-object-size and a port nothing listens on.
    static func failingOrigin() throws -> (nginx: Nginx, unreachable: String) {
        let nginx = try Nginx()
        let root = nginx.files!.root
        try Data("<!doctype html><html><body>not here</body></html>".utf8).write(to: URL(fileURLWithPath: root + "/images/page.png"))
        try Data(Array(repeating: 0x89, count: 20_000)).write(to: URL(fileURLWithPath: root + "/images/big.png"))
        let unreachable = "http://127.0.0.1:\(try unusedLocalPort())/gone.png"
        let manifest = """
        [{"url": "01-sunrise.png"}, {"url": "01-sunrise.png"}, {"url": "missing.png"}, {"url": "page.png"}, {"url": "big.png"}, {"url": "\(unreachable)"}]
        """
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: root + "/images/failing.json"))
        for f in ["page.png", "big.png", "failing.json"] { chmod(root + "/images/" + f, 0o644) }
        return (nginx, unreachable)
    }

    static func answer(_ r: CLIResult) throws -> JSON { try JSONParser.parse(Array(r.stdout.utf8)) }

    @Test func failedRowsSayWhyAndBackOff() throws {
        let (nginx, _) = try Self.failingOrigin()
        let daemon = try Daemon(origin: nil, arguments: ["--images-url", nginx.base + "/images/failing.json", "--retries", "0",
                                                         "--max-object-size", "10K"])
        let failingPaths = ["/images/big.png", "/images/missing.png", "/images/page.png"]
        func requests(after seen: inout Int, atLeast n: Int) -> [String] {
            let new = nginx.accessLog.entries(after: seen, atLeast: n, timeout: n == 0 ? 0.3 : 8)
            seen += new.count
            return new.map(\.path).filter { $0 != "/images/failing.json" }.sorted()
        }
        var seen = 0

        let first = try PrefetchRun(socket: daemon.socket, ["images"])
        // Rows and transfers: 6 rows, 5 URLs, 5 requests.
        #expect(first.status == 5 && first.images?["downloaded"]?.int == 2 && first.images?["failed"]?.int == 4
                && first.images?["transfers"]?.int == 5, "\(first.problems)")
        #expect(requests(after: &seen, atLeast: 5) == ["/images/01-sunrise.png"] + failingPaths)

        let list = try Self.answer(try cachectl(["--json", "get", "images"], socket: daemon.socket))["images"]?.array ?? []
        #expect(list.count == 6)
        #expect(list[0]["last_error"] == .null && list[1]["last_error"] == .null, "\(list)")
        let errors = list.dropFirst(2).map { $0["last_error"] ?? .null }
        #expect(errors[0]["status"]?.int == 404 && errors[0]["reason"]?.string?.contains("404") == true, "\(errors[0])")
        #expect(errors[1]["status"] == .null && errors[1]["reason"]?.string?.contains("not an image") == true, "\(errors[1])")
        #expect(errors[2]["status"] == .null && errors[2]["reason"]?.string?.contains("max-object-size") == true, "\(errors[2])")
        #expect(errors[3]["status"] == .null && errors[3]["reason"]?.string?.isEmpty == false, "\(errors[3])")
        let now = Date().timeIntervalSince1970
        for e in errors { #expect(abs((e["time"]?.double ?? 0) - now) < 60, "\(e)") }

        let text = try cachectl(["get", "images"], socket: daemon.socket).stdout
        #expect(text.contains("failed") && text.contains("HTTP 404") && text.contains("max-object-size"), "\(text)")

        // The next prefetch retries every failed row; after a second failure
        // in a row each waits 2 minutes: the third sends nothing for them.
        let second = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(second.images?["failed"]?.int == 4 && second.images?["cached"]?.int == 2 && second.images?["skipped"]?.int == 0, "\(second.problems)")
        #expect(requests(after: &seen, atLeast: 4) == failingPaths)
        let third = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(third.status == 0 && third.images?["skipped"]?.int == 4 && third.images?["failed"]?.int == 0
                && third.images?["transfers"]?.int == 0, "\(third.problems)")
        _ = nginx.accessLog.entries(after: seen, atLeast: 1)
        #expect(requests(after: &seen, atLeast: 0).isEmpty, "rows in backoff are not fetched")
        // --force tries them all.
        let forced = try PrefetchRun(socket: daemon.socket, ["images", "--force"])
        #expect(forced.images?["failed"]?.int == 4 && forced.images?["downloaded"]?.int == 2, "\(forced.problems)")
        #expect(requests(after: &seen, atLeast: 5) == ["/images/01-sunrise.png"] + failingPaths)

        // A read-through get_image ignores the backoff; once it works the error is gone.
        try Data(try nginx.files!.bytes("images/02-ocean.png")).write(to: URL(fileURLWithPath: nginx.files!.root + "/images/missing.png"))
        chmod(nginx.files!.root + "/images/missing.png", 0o644)
        let fixed = try Self.answer(try cachectl(["--json", "get", "image", "2"], socket: daemon.socket))
        #expect(fixed["image"]?["hash"]?.string != nil && fixed["image"]?["last_error"] == .null, "\(fixed)")

        // status and the metrics tell the last prefetch.
        let status = try Self.answer(try cachectl(["--json", "status"], socket: daemon.socket))
        let last = status["last_prefetch"]
        #expect(last?["succeeded"] == .bool(true) && last?["summary"]?["images"]?["downloaded"]?.int == 2, "\(status)")
        #expect((last?["finished"]?.double ?? 0) >= (last?["started"]?.double ?? 1))
        let metrics = try cachectl(["metrics"], socket: daemon.socket).stdout
        #expect(metrics.contains("\ncached_last_prefetch_success 1\n") && metrics.contains("\ncached_last_prefetch_timestamp_seconds "), "\(metrics)")
        #expect(try cachectl(["status"], socket: daemon.socket).stdout.contains("last prefetch: finished"))

        // A prefetch that fails as a whole (the origin is gone) says so.
        nginx.stop()
        let down = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(down.status != 0)
        let after = try Self.answer(try cachectl(["--json", "status"], socket: daemon.socket))["last_prefetch"]
        #expect(after?["succeeded"] == .bool(false) && after?["summary"] == .null && after?["error"]?.string?.isEmpty == false, "\(String(describing: after))")
        #expect(try cachectl(["metrics"], socket: daemon.socket).stdout.contains("\ncached_last_prefetch_success 0\n"))
    }

    @Test func statusHasNoLastPrefetchBeforeOne() throws {
        let daemon = try Daemon(origin: nil)
        let status = try Self.answer(try cachectl(["--json", "status"], socket: daemon.socket))
        #expect(status["last_prefetch"] == .null, "\(status)")
        #expect(!(try cachectl(["metrics"], socket: daemon.socket).stdout.contains("last_prefetch")))
    }

    /// A row whose host does not resolve (`.invalid` never does: RFC 6761)
    /// says so, and the row beside it is cached. curl names the host when
    /// the resolver answers "no such name", and says "Resolving timed out"
    /// when no resolver answers (a machine without DNS): either is a
    /// failed resolve.
    @Test func aRowWhoseHostDoesNotResolveSaysSo() throws {
        let nginx = try Nginx()
        let root = nginx.files!.root
        let manifest = #"[{"url": "01-sunrise.png"}, {"url": "http://no-such-host.invalid/x.png"}]"#
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: root + "/images/dns.json"))
        chmod(root + "/images/dns.json", 0o644)
        let daemon = try Daemon(origin: nil, arguments: ["--images-url", nginx.base + "/images/dns.json", "--retries", "0"])
        let run = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(run.status == 5 && run.images?["downloaded"]?.int == 1 && run.images?["failed"]?.int == 1, "\(run.problems)")
        let list = try Self.answer(try cachectl(["--json", "get", "images"], socket: daemon.socket))["images"]?.array ?? []
        #expect(list.count == 2 && list[0]["last_error"] == .null, "\(list)")
        let error = list.last?["last_error"] ?? .null
        let reason = error["reason"]?.string ?? ""
        let named = reason.contains("Could not resolve host: no-such-host.invalid")
        #expect(error["status"] == .null && (named || reason.contains("Resolving timed out")), "\(error)")
        let text = try cachectl(["get", "images"], socket: daemon.socket).stdout
        #expect(text.contains("failed") && text.lowercased().contains("resolv"), "\(text)")
    }
}
