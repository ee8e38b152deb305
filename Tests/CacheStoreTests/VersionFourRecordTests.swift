import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The `objectChunks` record of format version 4 (docs/storage-format.md):
/// its bytes, its refusal under an older header, what replaying it does,
/// when a log moves to version 4 and when compaction takes it back.
@Suite struct VersionFourRecordTests {
    static let hash = Hash128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let digests = [Hash128(of: [1]), Hash128(of: [2]), Hash128(of: [3])]

    static let samples: [LogRecord] = [
        .objectChunks(hash: hash, chunks: ChunkDigests(shift: 20, digests: Array(digests.prefix(2)))),
        .objectChunks(hash: hash, chunks: ChunkDigests(shift: 12, digests: digests)),
        .objectChunks(hash: Hash128(of: [9]), chunks: ChunkDigests(shift: 30, digests: (0..<200).map { Hash128(of: [UInt8($0)]) })),
    ]

    @Test(arguments: samples)
    func roundTrips(_ record: LogRecord) throws {
        let framed = RecordCodec.encode(record)
        #expect(framed[8] == 14)
        #expect(try RecordCodec.decodePayload(framed[8...], version: 4) == record)
        #expect(record.formatVersion == 4)
    }

    /// The fields in order: type, hash, u8 shift, uvarint count, the digests.
    @Test func itsBytesAreTheDocumentedFields() {
        let payload = Array(RecordCodec.encode(Self.samples[0])[8...])
        #expect(payload == [14] + Self.hash.bytes + [20, 2] + Self.digests[0].bytes + Self.digests[1].bytes)
        #expect(payload.count == 1 + 16 + 1 + 1 + 32)
    }

    /// Under a version-1, -2 or -3 header it is a type that version does not know: refused as newer.
    @Test(arguments: [UInt8(1), 2, 3])
    func isUnknownInAnOlderLog(_ version: UInt8) {
        let payload = RecordCodec.encode(Self.samples[0])[8...]
        #expect(throws: RecordDecodingError.unknown("unknown record type 0x0e")) { try RecordCodec.decodePayload(payload, version: version) }
    }

    /// A chunk size this version does not know is refused as newer; a count
    /// past the bytes present, or a digest cut short, is damage.
    @Test func anUnknownChunkSizeIsRefusedAndAShortRecordIsDamage() throws {
        var p = Array(RecordCodec.encode(Self.samples[0])[8...])
        for shift: UInt8 in [11, 31, 0, 255] {
            p[17] = shift
            #expect(throws: RecordDecodingError.unknown("unknown chunk size 2^\(shift) in an objectChunks (type 0x0e) record")) {
                try RecordCodec.decodePayload(p[...], version: 4)
            }
        }
        p[17] = 20
        #expect(throws: RecordDecodingError(description: "record ends early")) { try RecordCodec.decodePayload(p.dropLast(), version: 4) }
        p[18] = 3
        #expect(throws: RecordDecodingError(description: "record ends early")) { try RecordCodec.decodePayload(p[...], version: 4) }
        p[18] = 1
        #expect(throws: RecordDecodingError.unknown("16 bytes after the last known field of a objectChunks (type 0x0e) record")) {
            try RecordCodec.decodePayload(p[...], version: 4)
        }
    }

    /// Digests belong to a known object whose size they fit; they go with it.
    @Test func replayKeepsDigestsWithTheirObject() {
        let chunks = ChunkDigests(shift: 20, digests: Array(Self.digests.prefix(2)))
        var s = StoreState()
        s.apply(transaction: [.objectChunks(hash: Self.hash, chunks: chunks)])
        #expect(s.chunks.isEmpty, "an unknown object's digests are ignored")
        s.apply(transaction: [.manifestSize(count: 1), .row(row: 0, url: "a.png", description: nil),
                              .rowObject(row: 0, hash: Self.hash, size: (1 << 20) + 1, type: .png),
                              .objectChunks(hash: Self.hash, chunks: chunks)])
        #expect(s.chunks[Self.hash] == chunks)
        s.apply(.objectChunks(hash: Self.hash, chunks: ChunkDigests(shift: 20, digests: Self.digests)))
        #expect(s.chunks[Self.hash] == chunks, "three digests do not fit 1 MiB + 1 byte: ignored")
        s.apply(.objectChunks(hash: Self.hash, chunks: ChunkDigests(shift: 12, digests: Self.digests)))
        #expect(s.chunks[Self.hash] == chunks, "nor three 4 KiB chunks")
        s.apply(transaction: [.objectRemoved(hash: Self.hash)])
        #expect(s.chunks.isEmpty, "removed with the object")
        s.apply(.rowObject(row: 0, hash: Self.hash, size: (1 << 20) + 1, type: .png))
        #expect(s.chunks.isEmpty, "the object back (a download again) has none until they are logged again")
    }
}

/// The move to version 4, and back, on real files.
@Suite struct VersionFourStoreTests {
    static let chunk = Int(Store.chunkSize)

    private static func headerVersion(_ dir: TempDir) throws -> UInt8 { try FileSystem.read(dir.path + "/index.log")[7] }

    private static func records(_ dir: TempDir) throws -> [[LogRecord]] {
        var out: [[LogRecord]] = []
        _ = LogScanner.scan(try FileSystem.read(dir.path + "/index.log")) { out.append($0) }
        return out
    }

    /// A version-3 store (a freshness logged) stays version 3 while only
    /// objects of one chunk are committed; the first larger one moves the log
    /// to version 4 first, and its `objectChunks` is logged in the same
    /// transaction as its `rowObject`. Digests survive reopen and compaction;
    /// compaction goes back to version 3 once no object has digests.
    @Test func theLogMovesToVersionFourAndBack() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("small.png", nil), ("one.png", nil), ("big.png", nil)], validators: Validators())
        let f = ImageFreshness(fetched: 1000)
        _ = try store.commitObject(try ChunkFixtures.writer(ChunkFixtures.png(100), store), rows: [(0, "small.png")],
                                   declaredContentType: nil, freshness: f)
        #expect(try Self.headerVersion(dir) == 3)
        _ = try store.commitObject(try ChunkFixtures.writer(ChunkFixtures.png(Self.chunk), store), rows: [(1, "one.png")],
                                   declaredContentType: nil, freshness: f)
        #expect(try Self.headerVersion(dir) == 3, "exactly one chunk: no digests, no version 4")

        let bytes = ChunkFixtures.png(3 * Self.chunk + 5)
        let big = try store.commitObject(try ChunkFixtures.writer(bytes, store), rows: [(2, "big.png")],
                                         declaredContentType: nil, freshness: f)
        #expect(try Self.headerVersion(dir) == 4)
        let expected = ChunkFixtures.digests(bytes)
        #expect(store.chunkDigests(big.hash) == expected && expected.digests.count == 4)
        let last = try #require(try Self.records(dir).last)
        #expect(last.count == 4 && last[0] == .rowObject(row: 2, hash: big.hash, size: big.size, type: .png))
        #expect(last.last == .objectChunks(hash: big.hash, chunks: expected), "in the rowObject's transaction")
        store.close()

        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.chunkDigests(big.hash) == expected)
        _ = try store.compact()
        #expect(try Self.headerVersion(dir) == 4)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.chunkDigests(big.hash) == expected, "kept by compaction")

        // The large object unmapped and collected: its digests go, and compaction returns to version 3.
        try store.replaceManifest([("small.png", nil), ("one.png", nil), ("other.png", nil)], validators: Validators())
        _ = try store.collectGarbage()
        #expect(store.chunkDigests(big.hash) == nil)
        _ = try store.compact()
        #expect(try Self.headerVersion(dir) == 3)
        store.close()
    }

    /// A second row mapping an object whose digests are logged logs them no more.
    @Test func digestsAreLoggedOncePerObject() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil), ("b.png", nil)], validators: Validators())
        let bytes = ChunkFixtures.png(Self.chunk + 1)
        _ = try store.commitObject(try ChunkFixtures.writer(bytes, store), rows: [(0, "a.png")])
        _ = try store.commitObject(try ChunkFixtures.writer(bytes, store), rows: [(1, "b.png")])
        let chunkRecords = try Self.records(dir).joined().filter { if case .objectChunks = $0 { true } else { false } }
        #expect(chunkRecords.count == 1)
    }

    /// A type-14 record under a version-3 header (a log that broke the
    /// rule) is refused as a newer cached's, every byte left as it was.
    @Test func aChunkRecordUnderAVersionThreeHeaderIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let log = try FormatEvolutionTests.makeStore(dir)
        var bytes = try FileSystem.read(log)
        bytes[7] = 3
        let offset = bytes.count
        bytes += RecordCodec.encode(VersionFourRecordTests.samples[0]) + RecordCodec.encode(.commit)
        try FormatEvolutionTests.overwrite(log, bytes)
        #expect(try FormatEvolutionTests.expectRefusedUntouched(dir, log) == "unknown record type 0x0e at offset \(offset) of index.log")
    }
}
