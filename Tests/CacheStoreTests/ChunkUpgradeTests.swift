import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The upgrade without a download: a large object stored by a daemon of
/// format version 3 has no chunk digests; its first range read hashes it
/// whole, as before, computes them in that pass and logs them.
@Suite struct ChunkUpgradeTests {
    static let chunk = Int(Store.chunkSize)
    static let bytes = ChunkFixtures.png(2 * chunk + 300, seed: 3)

    /// A store as a version-3 daemon left it: one row mapping `bytes`, with
    /// its freshness and use time, and the object's file in place.
    static func versionThreeStore(_ dir: TempDir) throws -> Hash128 {
        let hash = Hash128(of: bytes)
        var log = RecordCodec.header(version: 3)
        for r: LogRecord in [.manifestSize(count: 1), .row(row: 0, url: "big.png", description: nil),
                             .rowObject(row: 0, hash: hash, size: Int64(bytes.count), type: .png),
                             .rowFreshness(row: 0, freshness: ImageFreshness(fetched: 5)), .access(hash: hash, time: 5), .commit] {
            RecordCodec.encode(r, into: &log)
        }
        try Data(log).write(to: URL(fileURLWithPath: dir.path + "/index.log"))
        let path = dir.path + "/" + Store.objectRelativePath(hash)
        try FileManager.default.createDirectory(atPath: FileSystem.directoryName(of: path), withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return hash
    }

    static func transactions(_ dir: TempDir) throws -> [[LogRecord]] {
        var out: [[LogRecord]] = []
        _ = LogScanner.scan(try FileSystem.read(dir.path + "/index.log")) { out.append($0) }
        return out
    }

    @Test func theFirstRangeOfAVersionThreeObjectHashesItWholeAndLogsItsDigests() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let hash = try Self.versionThreeStore(dir)
        var store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.logFormatVersion == 3 && store.lacksChunkDigests(hash))

        let (fd, size) = try store.openVerifiedRange(hash, offset: 5, length: 10)
        fd.close()
        #expect(size == Int64(Self.bytes.count))
        let expected = ChunkFixtures.digests(Self.bytes)
        #expect(store.chunkDigests(hash) == expected && !store.lacksChunkDigests(hash))
        #expect(store.logFormatVersion == 4, "the log moved to version 4 before the record")
        #expect(try Self.transactions(dir).last == [.objectChunks(hash: hash, chunks: expected)])
        #expect(store.row(0)?.freshness == ImageFreshness(fetched: 5), "the rewrite kept the state")
        store.close()

        // After a restart the digests are there, and a range reads only its chunks:
        // damage in chunk 0 is not seen by a range in chunk 2.
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.chunkDigests(hash) == expected)
        try RangeVerificationTests.damage(store, hash, at: 1)
        let (again, _) = try store.openVerifiedRange(hash, offset: Int64(2 * Self.chunk), length: 1)
        again.close()
        #expect(store.objectRef(hash) != nil)
    }

    /// The first range read hashes the whole object: damage anywhere in it is found then.
    @Test func theFirstRangeOfAVersionThreeObjectFindsDamageAnywhere() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let hash = try Self.versionThreeStore(dir)
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try RangeVerificationTests.damage(store, hash, at: Self.bytes.count - 1)
        #expect(throws: StoreError.self) { try store.openVerifiedRange(hash, offset: 0, length: 1) }
        #expect(store.objectRef(hash) == nil && store.chunkDigests(hash) == nil)
        #expect(try FileSystem.list(dir.path + "/quarantine").count == 1)
        #expect(store.logFormatVersion == 3, "nothing of version 4 was logged")
    }

    /// What `verify` does for each object lacking digests: the whole hash
    /// with its digests, which are then logged; one already having them, or
    /// gone meanwhile, is left as it is.
    @Test func digestsFoundByAWholeHashAreLoggedOnce() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let hash = try Self.versionThreeStore(dir)
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let (fd, _, chunks) = try store.openVerifiedComputingChunks(hash)
        fd.close()
        let found = try #require(chunks)
        #expect(found == ChunkFixtures.digests(Self.bytes) && store.lacksChunkDigests(hash), "nothing logged yet")
        let gone = Hash128(of: [1, 2, 3])
        try store.recordChunkDigests([(hash, found), (gone, found)])
        #expect(store.chunkDigests(hash) == found && store.chunkDigests(gone) == nil)
        let before = try Self.transactions(dir).count
        try store.recordChunkDigests([(hash, found)])
        #expect(try Self.transactions(dir).count == before, "already there: nothing written")
    }
}
