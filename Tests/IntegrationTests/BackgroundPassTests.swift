import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// SIGTERM while a background pass runs (issue 34, point 4): the real
/// daemon, a real signal. The pass is the start's reconciliation of
/// `posts/`, made long by a `posts/` emptied while the daemon was down (each
/// of thousands of files is written again, fsynced); the daemon must exit
/// cleanly and at once, say how far the pass got, and finish it at the next
/// start (docs/architecture.md, "Background passes").
@Suite struct BackgroundPassTests {
    static let count = 10_000

    /// A feed of `count` posts of about 150 bytes.
    static func feed() -> [UInt8] {
        JSON.array((1...count).map { id in
            .object([("id", num(id)), ("title", .string("post \(id) of the background pass test")),
                     ("body", .string(String(repeating: "words \(id % 97) ", count: 8)))])
        }).encoded
    }

    static func postFiles(_ store: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store + "/posts")) ?? []).filter { $0.hasSuffix(".json") }
    }

    @Test func sigtermDuringTheReconciliationExitsCleanlyAndTheNextStartFinishesIt() throws {
        let origin = try Origin()
        try origin.write("posts.json", bytes: Self.feed())
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("prefetch", [("what", .string("posts"))])["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        let store = daemon.store
        #expect(FileManager.default.fileExists(atPath: store + "/posts.state"), "a clean stop is recorded")
        for name in Self.postFiles(store) { try FileManager.default.removeItem(atPath: store + "/posts/" + name) }

        // posts/ changed while the daemon was down: every file is checked, and written again.
        daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(waitUntil(20) { daemon.log.contains("post files: checking every post file against the index: posts/ changed") }, "\(daemon.log)")
        let signalled = Date()
        let status = daemon.stop()
        let took = Date().timeIntervalSince(signalled)
        let written = Self.postFiles(store).count
        print("SIGTERM during the reconciliation of \(Self.count) post files (\(written) written again by then): exit status \(status) after \(NumberText.fixed(took, 3)) s")
        let log = daemon.log
        #expect(status == 0)
        #expect(took < 5, "a stop that waits for the pass takes 10 s: \(log)")
        #expect(!log.contains("workers still busy"), "\(log)")
        #expect(log.contains("post files: reconciliation stopped at "), "the interruption is logged: \(log)")
        #expect(log.contains("it restarts at the next start"))
        #expect(!FileManager.default.fileExists(atPath: store + "/posts.state"), "a pass cut short records no clean stop")

        // The next start checks every file again, to the end; every post is there.
        daemon = try Daemon(origin: origin, scratch: scratch)
        let listed = try daemon.call("list_posts", [("limit", num(1))])
        #expect(listed["total"]?.int == Self.count)
        #expect(try daemon.call("get_post", [("id", num(Self.count))])["post"]?["id"]?.int == Self.count)
        #expect(waitUntil(300) { daemon.log.contains("post files: rewrote ") }, "\(daemon.log)")
        #expect(Self.postFiles(store).count == Self.count)
        for id in [1, Self.count / 2, Self.count] {
            let file = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: store + "/posts/\(id).json"))))
            #expect(file["id"]?.int == id)
        }
        #expect(daemon.stop() == 0)

        // And a clean stop after it lets the following start skip the check.
        daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(waitUntil(20) { daemon.log.contains("post files: not checked;") }, "\(daemon.log)")
        #expect(daemon.stop() == 0)
    }
}
