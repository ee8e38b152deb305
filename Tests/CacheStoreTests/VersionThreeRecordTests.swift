import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The `rowFreshness` record of format version 3 (docs/storage-format.md):
/// its bytes, what replaying it does, when a log moves to version 3 and
/// when compaction takes it back.
@Suite struct VersionThreeRecordTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("rest of a png".utf8)
    static let otherPNG: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("another png".utf8)

    static let samples: [LogRecord] = [
        .rowFreshness(row: 0, freshness: ImageFreshness(fetched: 0)),
        .rowFreshness(row: 7, freshness: ImageFreshness(validators: Validators(etag: "\"6b0f-13e\"", lastModified: "Tue, 01 Dec 2026 21:45:45 GMT"),
                                                        fetched: 1_764_628_800_123, lifetime: .seconds(3600))),
        .rowFreshness(row: 1 << 20, freshness: ImageFreshness(validators: Validators(etag: "W/\"x\""), fetched: -5, lifetime: .noCache)),
        .rowFreshness(row: 3, freshness: ImageFreshness(fetched: Int64.max, lifetime: .immutable)),
        .rowFreshness(row: 3, freshness: ImageFreshness(fetched: 1, lifetime: .seconds(Int64.max))),
    ]

    @Test(arguments: samples)
    func roundTrips(_ record: LogRecord) throws {
        let framed = RecordCodec.encode(record)
        #expect(framed[8] == 13)
        #expect(try RecordCodec.decodePayload(framed[8...], version: 3) == record)
        #expect(record.formatVersion == 3)
    }

    /// Under a version-1 or -2 header it is a type that version does not know: refused as newer.
    @Test(arguments: [UInt8(1), 2])
    func isUnknownInAnOlderLog(_ version: UInt8) {
        let payload = RecordCodec.encode(Self.samples[1])[8...]
        #expect(throws: RecordDecodingError.unknown("unknown record type 0x0d")) { try RecordCodec.decodePayload(payload, version: version) }
    }

    /// A lifetime kind past the four known is a value this version does not know; a record cut short is damage.
    @Test func anUnknownLifetimeIsRefusedAndAShortRecordIsDamage() throws {
        var p = Array(RecordCodec.encode(.rowFreshness(row: 1, freshness: ImageFreshness(fetched: 9)))[8...])
        p[p.count - 1] = 4
        #expect(throws: RecordDecodingError.unknown("unknown lifetime kind 4 in a rowFreshness (type 0x0d) record")) {
            try RecordCodec.decodePayload(p[...], version: 3)
        }
        #expect(throws: RecordDecodingError(description: "record ends early")) { try RecordCodec.decodePayload(p.dropLast(), version: 3) }
    }

    /// Freshness belongs to the object the row maps: a new object, a new URL
    /// or the object's removal clears it, and a row without an object ignores it.
    @Test func replayKeepsFreshnessWithTheRowsObject() {
        let f = ImageFreshness(validators: Validators(etag: "\"e\""), fetched: 10, lifetime: .seconds(60))
        let a = Hash128(of: Self.png), b = Hash128(of: Self.otherPNG)
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 2), .row(row: 0, url: "a.png", description: nil), .row(row: 1, url: "b.png", description: nil),
                              .rowFreshness(row: 1, freshness: f),
                              .rowObject(row: 0, hash: a, size: 16, type: .png), .rowFreshness(row: 0, freshness: f)])
        #expect(s.rows[0].freshness == f && s.rows[1].freshness == nil)
        s.apply(.rowObject(row: 0, hash: a, size: 16, type: .png))
        #expect(s.rows[0].freshness == f, "the same object again keeps it")
        s.apply(.rowObject(row: 0, hash: b, size: 16, type: .png))
        #expect(s.rows[0].freshness == nil, "a new object clears it")
        s.apply(transaction: [.rowFreshness(row: 0, freshness: f), .row(row: 0, url: "c.png", description: nil)])
        #expect(s.rows[0].freshness == nil && s.rows[0].object == nil, "a new URL clears it")
        s.apply(transaction: [.row(row: 0, url: "a.png", description: nil), .rowObject(row: 0, hash: a, size: 16, type: .png),
                              .rowFreshness(row: 0, freshness: f), .objectRemoved(hash: a)])
        #expect(s.rows[0].freshness == nil)
    }

    private static func write(_ bytes: [UInt8], to store: Store) throws -> ObjectWriter {
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try bytes.withUnsafeBytes { try w.append($0) }
        return w
    }

    private static func headerVersion(_ dir: TempDir) throws -> UInt8 { try FileSystem.read(dir.path + "/index.log")[7] }

    /// A store stays at its version until a freshness is logged: then the
    /// log is rewritten whole under version 3 first. Freshness survives a
    /// reopen and compaction; a 304's refresh touches only rows still on the
    /// object; compaction goes back to the oldest version once none is left.
    @Test func theLogMovesToVersionThreeAndBack() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("a.png", nil), ("a.png", nil), ("b.png", nil)], validators: Validators())
        let plain = try store.commitObject(try Self.write(Self.png, to: store), rows: [(2, "b.png")])
        #expect(try Self.headerVersion(dir) == 1, "a commit without freshness stays version 1")

        let f = ImageFreshness(validators: Validators(etag: "\"1\"", lastModified: "Tue, 01 Dec 2026 06:00:00 GMT"), fetched: 1000, lifetime: .seconds(60))
        let ref = try store.commitObject(try Self.write(Self.otherPNG, to: store), rows: [(0, "a.png"), (1, "a.png")],
                                         declaredContentType: "image/png", freshness: f)
        #expect(try Self.headerVersion(dir) == 3)
        #expect(store.row(0)?.freshness == f && store.row(1)?.freshness == f && store.row(2)?.freshness == nil)

        // A 304: only rows still on `ref` and on their URL are refreshed.
        let g = ImageFreshness(validators: f.validators, fetched: 2000, lifetime: .noCache)
        try store.refreshFreshness(ref, rows: [(0, "a.png"), (1, "other.png"), (2, "b.png")], freshness: g)
        #expect(store.row(0)?.freshness == g && store.row(1)?.freshness == f && store.row(2)?.freshness == nil)
        store.close()

        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.row(0)?.freshness == g && store.row(1)?.freshness == f && store.row(0)?.object == ref)
        _ = try store.compact()
        #expect(try Self.headerVersion(dir) == 3)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.row(0)?.freshness == g && store.row(1)?.freshness == f)

        // Without rows mapped by a fresh answer, compaction returns to version 1.
        try store.replaceManifest([("c.png", nil), ("c.png", nil), ("b.png", nil)], validators: Validators())
        _ = try store.compact()
        #expect(try Self.headerVersion(dir) == 1)
        #expect(store.row(2)?.object == plain)
        store.close()
    }
}
