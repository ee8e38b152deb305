import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The `variant` record of format version 5 (docs/storage-format.md): its
/// bytes, its refusal under an older header, what replaying it does, and
/// what gc, eviction and compaction do with variants.
@Suite struct VersionFiveRecordTests {
    static let source = Hash128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let object = Hash128(high: 0x1111_2222_3333_4444, low: 0x5555_6666_7777_8888)
    static let spec = VariantSpec(width: 160, height: 72, fit: .contain, format: .webp)
    static let variant = VariantRef(object: ObjectRef(hash: object, size: 300, type: .webp), width: 160, height: 53)

    static let samples: [LogRecord] = [
        .variant(source: source, spec: spec, variant: variant),
        .variant(source: source, spec: VariantSpec(width: nil, height: 2048, fit: .cover, format: .avif),
                 variant: VariantRef(object: ObjectRef(hash: object, size: 1 << 40, type: .avif), width: 1, height: 2048)),
        .variant(source: source, spec: VariantSpec(width: 30, height: 20, fit: .cover, format: .jpeg),
                 variant: VariantRef(object: ObjectRef(hash: source, size: 0, type: .jpeg), width: 30, height: 20)),
    ]

    @Test(arguments: samples)
    func roundTrips(_ record: LogRecord) throws {
        let framed = RecordCodec.encode(record)
        #expect(framed[8] == 15)
        #expect(try RecordCodec.decodePayload(framed[8...], version: 5) == record)
        #expect(record.formatVersion == 5)
    }

    /// cover with one side free is contain: one spec, so one variant, for both.
    @Test func coverWithASideFreeIsContain() {
        #expect(VariantSpec(width: 96, height: nil, fit: .cover, format: .png) == VariantSpec(width: 96, height: nil, fit: .contain, format: .png))
        #expect(VariantSpec(width: 96, height: 96, fit: .cover, format: .png).fit == .cover)
    }

    /// The fields in order: type, source hash, uvarint w, uvarint h (0: free),
    /// u8 fit, u8 format, the variant's hash, uvarint size, u8 type, uvarint
    /// width, uvarint height.
    @Test func itsBytesAreTheDocumentedFields() {
        let payload = Array(RecordCodec.encode(Self.samples[0])[8...])
        let expected: [UInt8] = [15] + Self.source.bytes + [0xA0, 0x01, 72, 1, 4] + Self.object.bytes + [0xAC, 0x02, 4, 0xA0, 0x01, 53]
        #expect(payload == expected)
    }

    /// Under an older header it is a type that version does not know: refused as newer.
    @Test(arguments: [UInt8(1), 2, 3, 4])
    func isUnknownInAnOlderLog(_ version: UInt8) {
        let payload = RecordCodec.encode(Self.samples[0])[8...]
        #expect(throws: RecordDecodingError.unknown("unknown record type 0x0f")) { try RecordCodec.decodePayload(payload, version: version) }
    }

    /// An unknown fit, format or image type is refused as newer; a record cut short is damage.
    @Test func unknownValuesAreRefusedAndAShortRecordIsDamage() throws {
        let p = Array(RecordCodec.encode(Self.samples[0])[8...])
        var bad = p
        bad[20] = 3
        #expect(throws: RecordDecodingError.unknown("unknown variant fit 3 or format 4 in a variant (type 0x0f) record")) {
            try RecordCodec.decodePayload(bad[...], version: 5)
        }
        bad = p
        bad[21] = 3
        #expect(throws: RecordDecodingError.unknown("unknown variant fit 1 or format 3 in a variant (type 0x0f) record")) {
            try RecordCodec.decodePayload(bad[...], version: 5)
        }
        bad = p
        bad[40] = 99
        #expect(throws: RecordDecodingError.unknown("unknown image type 99 in a variant (type 0x0f) record")) {
            try RecordCodec.decodePayload(bad[...], version: 5)
        }
        #expect(throws: RecordDecodingError(description: "record ends early")) { try RecordCodec.decodePayload(p.dropLast(), version: 5) }
        #expect(throws: RecordDecodingError.unknown("1 bytes after the last known field of a variant (type 0x0f) record")) {
            try RecordCodec.decodePayload((p + [0])[...], version: 5)
        }
    }

    /// A state with row 0 mapping the source.
    static func stateWithSource() -> StoreState {
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 1), .row(row: 0, url: "a.png", description: nil),
                              .rowObject(row: 0, hash: source, size: 1000, type: .png)])
        return s
    }

    /// A variant belongs to a known source; its object is counted like any
    /// other; it goes with its own object and with its source's.
    @Test func replayKeepsVariantsWithTheirObjects() {
        var s = StoreState()
        s.apply(transaction: [Self.samples[0]])
        #expect(s.variants.isEmpty && s.objects.isEmpty, "a variant of an unknown object is ignored")
        s = Self.stateWithSource()
        s.apply(transaction: [Self.samples[0]])
        #expect(s.variants[VariantKey(source: Self.source, spec: Self.spec)] == Self.variant)
        #expect(s.bytes == 1300 && s.objects.count == 2)
        s.apply(transaction: [.objectRemoved(hash: Self.object)])
        #expect(s.variants.isEmpty && s.bytes == 1000, "removed with its object")
        s.apply(transaction: [Self.samples[0], .objectRemoved(hash: Self.source)])
        #expect(s.variants.isEmpty, "removed with its source")
        #expect(s.objects[Self.object] != nil, "its object stays known until gc, as an unmapped row's does")
        #expect(s.referencedObjects.isEmpty)
    }

    /// gc keeps the variants of objects rows map, and nothing else.
    @Test func referencedObjectsHoldVariantsOfMappedObjects() {
        var s = Self.stateWithSource()
        s.apply(transaction: [Self.samples[0]])
        #expect(s.referencedObjects == [Self.source, Self.object])
        s.apply(transaction: [.row(row: 0, url: "b.png", description: nil)])
        #expect(s.referencedObjects.isEmpty, "the row no longer maps the source: neither is referenced")
        #expect(s.variants.count == 1, "the mapping stays until gc forgets the source")
    }

    /// Compaction writes each variant after the rows, with its use time, so
    /// that it replays; the rewritten log rebuilds the same variants.
    @Test func compactionRebuildsTheVariants() {
        var s = Self.stateWithSource()
        s.apply(transaction: [Self.samples[0], .access(hash: Self.object, time: 77)])
        var replayed = StoreState()
        for t in s.liveTransactions() { replayed.apply(transaction: t) }
        #expect(replayed.variants == s.variants)
        #expect(replayed.objects.lastUse(Self.object) == 77)
        #expect(replayed.bytes == s.bytes)
    }
}
