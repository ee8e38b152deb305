import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// Issue 24, items 1 and 2: a prefetch revalidates stale images with
/// conditional requests (RFC 9111), and rows that failed say why. What each
/// server was asked is read from its own access log.
@Suite struct ImageFreshnessTests {
    /// The image paths of the origin's manifest, each once.
    static func imagePaths(_ files: OriginFiles) throws -> [String] {
        Array(Set(try files.imageFiles().map { "/" + $0 })).sorted()
    }

    /// A file's bytes replaced by `bytes`, dated later (a new ETag and Last-Modified).
    static func replace(_ files: OriginFiles, _ relative: String, with bytes: [UInt8], age: Double = -600) throws {
        let path = files.root + "/" + relative
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(age)], ofItemAtPath: path)
    }

    /// Only the file's date changes (nginx's and Caddy's ETags change with it).
    static func touch(_ files: OriginFiles, _ relative: String) throws {
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-300)], ofItemAtPath: files.root + "/" + relative)
    }

    static func rows(_ socket: String) throws -> [JSON] {
        let r = try cachectl(["--json", "get", "images"], socket: socket)
        return (try JSONParser.parse(Array(r.stdout.utf8)))["images"]?.array ?? []
    }

    /// The scenario both servers get: every image goes stale after a second;
    /// one file gets new bytes, one is only touched, the rest stay. The
    /// prefetch after that sends one conditional request per URL and
    /// downloads only the replaced one; gc then removes its old object.
    static func staleImagesAreRevalidated(_ server: any RealServer, files: OriginFiles, arguments: [String] = []) throws {
        let scratch = Scratch()
        let daemon = try Daemon(origin: nil, arguments: ["--images-url", server.manifestURL, "--images-revalidate-after", "1"] + arguments,
                                scratch: scratch)
        let paths = try imagePaths(files)
        let rowCount = try files.imageFiles().count
        let first = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(first.status == 0 && first.images?["downloaded"]?.int == rowCount && first.images?["transfers"]?.int == paths.count,
                "\(server.name): \(first.problems)")
        var seen = server.accessLog.entries(after: 0, atLeast: paths.count + 1).count
        let before = try rows(daemon.socket)
        let replaced = "images/15-teal.gif", touched = "images/14-fractal.jpg"
        let newBytes = try Array(Data(contentsOf: URL(fileURLWithPath: Paths.packageRoot + "/Tests/Fixtures/images/sample.gif")))
        #expect(newBytes != (try files.bytes(replaced)))
        try replace(files, replaced, with: newBytes)
        try touch(files, touched)
        Thread.sleep(forTimeInterval: 1.2)

        let second = try PrefetchRun(socket: daemon.socket, ["images"])
        let changedRows = try files.imageFiles().filter { $0 == replaced }.count
        #expect(second.status == 0 && second.images?["downloaded"]?.int == 0 && second.images?["cached"]?.int == 0
                && second.images?["revalidated"]?.int == rowCount && second.images?["changed"]?.int == changedRows
                && second.images?["unchanged"]?.int == rowCount - changedRows && second.images?["transfers"]?.int == paths.count,
                "\(server.name): \(second.problems)")
        let entries = server.accessLog.entries(after: seen, atLeast: paths.count + 1).filter { $0.path != "/images/manifest.json" }
        seen += entries.count + 1
        print("[freshness] \(server.name) stale prefetch: \(entries.map(\.description))")
        #expect(entries.map(\.path).sorted() == paths, "\(server.name): one request per image URL: \(entries)")
        for e in entries {
            #expect(e.ifNoneMatch != nil && e.ifModifiedSince != nil, "\(server.name): conditional: \(e.line)")
            let expected = e.path == "/" + replaced || e.path == "/" + touched ? 200 : 304
            #expect(e.status == expected, "\(server.name): \(e.line)")
        }
        let after = try rows(daemon.socket)
        for (b, a) in zip(before, after) {
            let isReplaced = a["url"]?.string?.hasSuffix(replaced) == true
            #expect((a["hash"] == b["hash"]) != isReplaced, "\(server.name): only the replaced row is remapped: \(b) -> \(a)")
        }
        let row = try #require(after.firstIndex { $0["url"]?.string?.hasSuffix(replaced) == true })
        let out = scratch.path + "/replaced"
        #expect(try cachectl(["get", "image", String(row), "-o", out], socket: daemon.socket).status == 0)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == newBytes)

        // The old object is named by no row: gc removes it, and only it.
        let gc = try cachectl(["--json", "gc"], socket: daemon.socket)
        #expect((try JSONParser.parse(Array(gc.stdout.utf8)))["removed"]?.int == 1, "\(server.name): \(gc.stdout)")
        let oldHash = try #require(before[row]["hash"]?.string)
        #expect(!FileManager.default.fileExists(atPath: daemon.store + "/objects/" + oldHash.prefix(2) + "/" + oldHash.dropFirst(2)))

        // Revalidated freshness is durable: after a restart, within the
        // second, nothing is sent for the images.
        #expect(daemon.stop() == 0)
        let again = try Daemon(origin: nil, arguments: ["--images-url", server.manifestURL, "--images-revalidate-after", "600"] + arguments,
                               scratch: scratch)
        let third = try PrefetchRun(socket: again.socket, ["images"])
        #expect(third.status == 0 && third.images?["cached"]?.int == rowCount && third.images?["transfers"]?.int == 0, "\(third.problems)")
        _ = server.accessLog.entries(after: seen, atLeast: 1)
        #expect(server.accessLog.entries().dropFirst(seen).allSatisfy { $0.path == "/images/manifest.json" })
    }

    @Test func nginxReplacedTouchedAndUnchangedFiles() throws {
        let nginx = try Nginx()
        try Self.staleImagesAreRevalidated(nginx, files: nginx.files!)
    }

    @Test func caddyReplacedTouchedAndUnchangedFiles() throws {
        let caddy = try Caddy()
        try Self.staleImagesAreRevalidated(caddy, files: caddy.files, arguments: ["--ca-file", caddy.caRoot])
    }

    /// `expires 1h` keeps an image fresh whatever images-revalidate-after
    /// says; `expires epoch` (no-cache) makes it stale at once.
    @Test func nginxExpiresAndNoCache() throws {
        let nginx = try Nginx(extra: "location /images/ { expires 1h; } location = /images/01-sunrise.png { expires epoch; }")
        let files = nginx.files!
        let daemon = try Daemon(origin: nil, arguments: ["--images-url", nginx.manifestURL, "--images-revalidate-after", "1"])
        let rowCount = try files.imageFiles().count
        let first = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(first.status == 0 && first.images?["downloaded"]?.int == rowCount, "\(first.problems)")
        let paths = try Self.imagePaths(files)
        let seen = nginx.accessLog.entries(after: 0, atLeast: paths.count + 1).count
        Thread.sleep(forTimeInterval: 1.2)
        func logRecords() throws -> Int {
            (try JSONParser.parse(Array(try cachectl(["--json", "status"], socket: daemon.socket).stdout.utf8)))["log_records"]?.int ?? -1
        }
        let records = try logRecords()
        let second = try PrefetchRun(socket: daemon.socket, ["images"])
        #expect(try logRecords() == records, "a no-cache 304 restating its validators logs nothing")
        #expect(second.status == 0 && second.images?["revalidated"]?.int == 1 && second.images?["unchanged"]?.int == 1
                && second.images?["cached"]?.int == rowCount - 1 && second.images?["transfers"]?.int == 1, "\(second.problems)")
        let entries = nginx.accessLog.entries(after: seen, atLeast: 2).filter { $0.path != "/images/manifest.json" }
        #expect(entries.map { "\($0.path) \($0.status)" } == ["/images/01-sunrise.png 304"], "\(entries)")
        #expect(entries.first?.ifNoneMatch != nil && entries.first?.ifModifiedSince != nil)
    }
}
