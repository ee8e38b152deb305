import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// Images of chosen sizes and what their chunk digests must be.
enum ChunkFixtures {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// `size` bytes that are a PNG (its signature, then bytes from a fixed
    /// generator), or fewer than the signature's when `size` is under 8.
    static func png(_ size: Int, seed: UInt64 = 1) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        var out = Array(signature.prefix(size))
        out.reserveCapacity(size)
        while out.count < size {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            out.append(UInt8(truncatingIfNeeded: state >> 33))
        }
        return out
    }

    /// The digests of `bytes` in 1 MiB chunks, each hashed on its own.
    static func digests(_ bytes: [UInt8]) -> ChunkDigests {
        let chunk = Int(Store.chunkSize)
        let all = stride(from: 0, to: bytes.count, by: chunk).map { Hash128(of: Array(bytes[$0..<min($0 + chunk, bytes.count)])) }
        return ChunkDigests(shift: ChunkDigests.defaultShift, digests: all)
    }

    /// A writer that received `bytes` in pieces of `piece` bytes.
    static func writer(_ bytes: [UInt8], _ store: Store, piece: Int = 16 * 1024) throws -> ObjectWriter {
        let w = try store.newObjectWriter(maxSize: 1 << 30)
        var at = 0
        while at < bytes.count {
            let end = min(at + piece, bytes.count)
            try bytes[at..<end].withUnsafeBytes { try w.append($0) }
            at = end
        }
        return w
    }
}

/// Chunk digests at commit: computed in the download's own pass, for an
/// object larger than one chunk only, whatever the pieces it arrives in.
@Suite struct ChunkDigestTests {
    static let chunk = Int(Store.chunkSize)

    /// 0 bytes, 1 byte, exactly one chunk: no digests; one chunk and a byte:
    /// two; three and a half chunks: four, the last one short.
    @Test(arguments: [0, 1, chunk, chunk + 1, 3 * chunk + chunk / 2])
    func theWriterHashesEachChunkOfItsStream(_ size: Int) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let bytes = ChunkFixtures.png(size)
        // Pieces of a prime size, so that chunk boundaries fall inside them.
        let w = try ChunkFixtures.writer(bytes, store, piece: 65_537)
        defer { w.discard() }
        #expect(w.hash == Hash128(of: bytes))
        if size <= Self.chunk {
            #expect(w.chunkDigests == nil, "\(size) bytes fit in one chunk")
        } else {
            #expect(w.chunkDigests == ChunkFixtures.digests(bytes))
            #expect(w.chunkDigests?.digests.count == (size + Self.chunk - 1) / Self.chunk)
        }
    }

    /// One append spanning several chunks, pieces straddling each boundary,
    /// single bytes across the first: the same digests.
    @Test(arguments: [4 * chunk, chunk - 1, chunk + 1, 1])
    func theDigestsDoNotDependOnThePieces(_ piece: Int) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let size = piece == 1 ? Self.chunk + 9 : 3 * Self.chunk + 17
        let bytes = ChunkFixtures.png(size, seed: 5)
        let w = try ChunkFixtures.writer(bytes, store, piece: piece)
        defer { w.discard() }
        #expect(w.hash == Hash128(of: bytes) && w.chunkDigests == ChunkFixtures.digests(bytes))
    }

    /// A retried transfer starts its digests over too.
    @Test func aResetWriterForgetsItsChunks() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let w = try ChunkFixtures.writer(ChunkFixtures.png(2 * Self.chunk, seed: 7), store)
        defer { w.discard() }
        try w.reset()
        let bytes = ChunkFixtures.png(Self.chunk + 3)
        try bytes.withUnsafeBytes { try w.append($0) }
        #expect(w.chunkDigests == ChunkFixtures.digests(bytes))
    }

    /// What a commit logs, by size: nothing for 0 and 1 byte (not images:
    /// refused), nothing for exactly one chunk, the digests for more.
    @Test(arguments: [0, 1, chunk, chunk + 1, 5 * chunk - 1])
    func aCommitLogsTheDigestsOfAnObjectLargerThanOneChunk(_ size: Int) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let bytes = ChunkFixtures.png(size)
        let w = try ChunkFixtures.writer(bytes, store)
        guard size >= ChunkFixtures.signature.count else {
            #expect(throws: StoreError.self) { try store.commitObject(w, rows: [(0, "a.png")]) }
            return
        }
        let ref = try store.commitObject(w, rows: [(0, "a.png")])
        #expect(store.chunkDigests(ref.hash) == (size > Self.chunk ? ChunkFixtures.digests(bytes) : nil))
        #expect(store.lacksChunkDigests(ref.hash) == false)
        #expect(store.logFormatVersion == (size > Self.chunk ? 4 : 1))
    }

    /// `ChunkDigests.chunks`: the chunks a range lies in.
    @Test func theChunksOfARange() {
        let d = ChunkDigests(shift: 20, digests: Array(repeating: Hash128(of: [0]), count: 4))
        let mib = Int64(Self.chunk)
        #expect(d.chunks(offset: 0, length: 1) == 0...0)
        #expect(d.chunks(offset: mib - 1, length: 2) == 0...1)
        #expect(d.chunks(offset: mib, length: mib) == 1...1)
        #expect(d.chunks(offset: mib - 1, length: 2 * mib + 2) == 0...3)
        #expect(d.fit(size: 3 * mib + 1) && !d.fit(size: 3 * mib) && !d.fit(size: 4 * mib + 1))
    }
}
