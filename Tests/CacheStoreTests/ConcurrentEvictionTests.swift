import Foundation
import Dispatch
import Testing
@testable import CacheStore
import CacheSystem

/// `max-size` under concurrent downloads: the group commit's eviction spares
/// every commit in flight, so the commits leaving must evict what it spared
/// (`Store.evictSpared`).
@Suite struct ConcurrentEvictionTests {
    private static func image(_ n: Int) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("image number \(n) ".utf8) + Array(repeating: UInt8(n & 0xff), count: 200)
    }

    /// Sixteen commits queued behind a held log (as a slow fsync makes
    /// them queue): the first leader's eviction spares the fifteen in
    /// flight and the second's spares its whole batch, so without the
    /// eviction as each commit leaves the store ends at sixteen objects
    /// under a cap of two.
    @Test func commitsQueuedTogetherStillEndUnderMaxSize() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let n = 16
        let size = Int64(Self.image(0).count)
        let limit = 2 * size + 10
        let store = try Store(StoreConfiguration(directory: dir.path, maxBytes: limit))
        try store.replaceManifest((0..<n).map { ("\($0).png", nil) }, validators: Validators())
        let writers = try (0..<n).map { try objectWriter(holding: Self.image($0), in: store) }
        let failures = try commitQueuedTogether(writers, in: store)
        #expect(failures.isEmpty, "\(failures)")
        let stats = store.stats()
        #expect(stats.bytes <= limit, "\(stats.bytes) bytes cached under max-size \(limit)")
        #expect(stats.evictions >= n - 2, "\(stats.evictions) evictions")
        let cached = (0..<n).filter { store.row($0)?.object != nil }
        #expect(!cached.isEmpty && cached.count <= 2, "rows still cached: \(cached)")
        let files = try objectFiles(dir.path)
        #expect(files.count == cached.count, "object files left: \(files)")
        store.close()
        let reopened = try Store(StoreConfiguration(directory: dir.path, maxBytes: limit))
        defer { reopened.close() }
        #expect(reopened.stats().bytes <= limit)
        #expect((0..<n).filter { reopened.row($0)?.object != nil } == cached)
    }

    /// The regular files under `objects/`.
    private func objectFiles(_ store: String) throws -> [String] {
        let root = store + "/objects"
        return try FileManager.default.contentsOfDirectory(atPath: root).flatMap { fanout in
            try FileManager.default.contentsOfDirectory(atPath: root + "/" + fanout).map { fanout + "/" + $0 }
        }
    }
}
