import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem
import TestSupport

/// `objectRange` over a real store and the fault origin: the chunks of a
/// range are verified; damage in them is a corrupt object (quarantined,
/// counted, downloaded again, then served); damage elsewhere is not read.
/// And `verify` gives chunk digests to a large object stored without them.
@Suite struct ServiceRangeTests {
    static let chunk = Int(CacheService.rangeChunkSize)
    /// A PNG of three chunks and 1,000 bytes, every byte its offset's mix.
    static let big: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        + (8..<(3 * chunk + 1000)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }

    static func harness() async throws -> Harness {
        try await Harness.start(extra: ["images/big.json": Array(#"[{"url": "big.png"}]"#.utf8), "images/big.png": big]) { origin in
            var feeds = Harness.feeds(origin, images: "/images/big.json")
            feeds.maxObjectSize = 8 << 20
            return feeds
        }
    }

    /// Row 0 downloaded: its object.
    static func cached(_ h: Harness) async throws -> ObjectInfo {
        let entry = await answer { h.service.image(row: 0, fetch: true, then: $0) }
        return try #require(try entry.result.get().object)
    }

    /// The range's bytes through the descriptor handed out (closed here).
    static func bytes(_ part: VerifiedRange) throws -> [UInt8] {
        defer { part.descriptor.close() }
        var out = [UInt8](repeating: 0, count: Int(part.length))
        let n = out.withUnsafeMutableBytes { pread(part.descriptor.rawValue, $0.baseAddress, $0.count, off_t(part.offset)) }
        return Array(out.prefix(max(0, n)))
    }

    static func range(_ h: Harness, _ hash: Hash128, _ offset: Int, _ length: Int) async -> Result<VerifiedRange, CacheError> {
        let got = await answer { h.service.objectRange(hash: hash, offset: Int64(offset), length: Int64(length), then: $0) }
        #expect(!got.isNow, "verified on a worker, never on the caller's thread")
        return got.result
    }

    static func downloads(_ h: Harness) throws -> Int {
        try h.origin!.requests().filter { $0.path == "/images/big.png" }.count
    }

    @Test func aRangeAcrossChunksIsServedVerified() async throws {
        let h = try await Self.harness()
        defer { h.close() }
        let object = try await Self.cached(h)
        #expect(h.service.store.chunkDigests(object.hash)?.digests.count == 4, "logged at commit")
        let part = try await Self.range(h, object.hash, Self.chunk - 3, Self.chunk + 6).get()
        #expect(part.size == Int64(Self.big.count))
        #expect(try Self.bytes(part) == Array(Self.big[(Self.chunk - 3)..<(2 * Self.chunk + 3)]))
        #expect(h.service.status().counters.quarantined == 0)
    }

    /// Inside the range: quarantined, counted, downloaded again, and the
    /// range is served from the good copy.
    @Test func aDamagedChunkInsideTheRangeIsDownloadedAgainAndServed() async throws {
        let h = try await Self.harness()
        defer { h.close() }
        let object = try await Self.cached(h)
        try ServiceMaintenanceTests.corrupt(object.path)  // the middle byte: chunk 1
        let part = try await Self.range(h, object.hash, Self.chunk, 10).get()
        #expect(try Self.bytes(part) == Array(Self.big[Self.chunk..<(Self.chunk + 10)]))
        #expect(h.service.status().counters.quarantined == 1)
        #expect(try Self.downloads(h) == 2)
        #expect(ServiceMaintenanceTests.contents(object.path) == Self.big, "repaired on disk")
    }

    /// Outside the range: not read, so served, and nothing is downloaded
    /// (those bytes are not sent).
    @Test func aDamagedChunkOutsideTheRangeIsNotRead() async throws {
        let h = try await Self.harness()
        defer { h.close() }
        let object = try await Self.cached(h)
        try ServiceMaintenanceTests.corrupt(object.path)
        let tail = 3 * Self.chunk
        let part = try await Self.range(h, object.hash, tail, 1000).get()
        #expect(try Self.bytes(part) == Array(Self.big[tail...]))
        #expect(h.service.status().counters.quarantined == 0)
        #expect(try Self.downloads(h) == 1)
    }

    /// A store a version-3 daemon left: `verify` hashes its large object
    /// whole, as always, and logs its digests from that pass; nothing is
    /// downloaded.
    @Test func verifyGivesChunkDigestsToAnObjectStoredWithout() async throws {
        let origin = try await ServiceOrigin.start()
        let dir = try makeTempDirectory("svc-range")
        let hash = Hash128(of: Self.big)
        try Self.versionThreeStore(dir + "/store", url: origin.url("/images/big.png"))
        let h = try Harness(origin: origin, feeds: Harness.feeds(origin), storeDirectory: dir + "/store", directory: dir)
        defer { h.close() }
        #expect(h.service.store.lacksChunkDigests(hash) && h.service.store.logFormatVersion == 3)
        let report = await completion { h.service.verify(then: $0) }
        #expect(report.checked == 1 && report.corrupt.isEmpty)
        #expect(h.service.store.chunkDigests(hash)?.digests.count == 4)
        #expect(h.service.store.logFormatVersion == 4)
        #expect(try origin.requests().isEmpty, "nothing downloaded")
    }

    /// One row mapping `big` (URL `url`), as a daemon of format version 3
    /// logged it, and the object's file.
    static func versionThreeStore(_ store: String, url: String) throws {
        let hash = Hash128(of: big)
        var log = RecordCodec.header(version: 3)
        for r: LogRecord in [.manifestSize(count: 1), .row(row: 0, url: url, description: nil),
                             .rowObject(row: 0, hash: hash, size: Int64(big.count), type: .png),
                             .rowFreshness(row: 0, freshness: ImageFreshness(fetched: 1)), .commit] {
            RecordCodec.encode(r, into: &log)
        }
        let hex = hash.hex
        let fanout = store + "/objects/" + hex.prefix(2)
        try FileManager.default.createDirectory(atPath: fanout, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(store, 0o700)
        try Data(log).write(to: URL(fileURLWithPath: store + "/index.log"))
        try Data(big).write(to: URL(fileURLWithPath: fanout + "/" + hex.dropFirst(2)))
    }
}
