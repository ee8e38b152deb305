import Foundation
import Testing
import CacheProtocol

/// `max-size` at the scale of a real prefetch: 2,000 images of 1 KiB
/// downloaded 16 at a time into a cap of 4 KiB, less than the commits in
/// flight hold together. The store ends under its cap, every row listed as
/// cached reads back, and a restart finds the same. (The race this cap lost
/// at the end of a burst of commits, `Store.evictSpared`, is pinned by
/// ConcurrentEvictionTests, which holds the log to make it certain; here
/// the commits arrive spread out and it rarely shows.)
@Suite struct MaxSizeScaleTests {
    @Test func aPrefetchOfManyImagesEndsUnderMaxSize() throws {
        let origin = try IntegrityTests.manyImages(2000, padding: 1000)
        let cap = 4096
        let daemon = try Daemon(origin: origin, arguments: ["--max-size", "4K", "--concurrency", "16"])
        let r = try daemon.call("prefetch", [("what", .string("images"))])
        #expect(r["ok"] == .bool(true), "\(r["error"] ?? .null)")
        #expect(r["images"]?["downloaded"]?.int == 2000, "\(r["images"] ?? .null)")
        let status = try daemon.call("status")
        let bytes = status["bytes"]?.int ?? .max
        #expect(bytes <= cap, "\(bytes) bytes cached under max-size \(cap)")
        #expect((status["counters"]?["evictions"]?.int ?? 0) > 1000, "\(status["counters"] ?? .null)")
        try IntegrityTests.assertEveryCachedRowReads(daemon, "after the prefetch")
        #expect(daemon.stop() == 0)
        let again = try Daemon(origin: origin, arguments: ["--max-size", "4K"], scratch: daemon.scratch)
        #expect((try again.call("status")["bytes"]?.int ?? .max) <= cap)
        try IntegrityTests.assertEveryCachedRowReads(again, "after a restart")
    }
}
