import CacheSystem
/// Which feed a `validators` or `page` record belongs to.
public enum Feed: UInt8, Sendable, CaseIterable {
    case posts = 1, manifest = 2
}

/// One entry of `index.log`. The store's state is what replaying these in
/// order produces; docs/storage-format.md describes the bytes.
public enum LogRecord: Equatable, Sendable {
    /// Post `id` now has these exact bytes (what the origin sent for it).
    /// Type 1 for an integer id, 9 (format version 2) for a string id.
    case post(id: PostID, json: [UInt8])
    /// Post `id` is gone upstream (a tombstone). Type 2, or 10 for a string id.
    case postRemoved(id: PostID)
    /// The manifest has `count` rows; rows at or past it are forgotten.
    case manifestSize(count: Int)
    /// Row `row` has this URL (as written in the manifest) and description.
    /// If the URL differs from the row's previous one, its object mapping is cleared.
    case row(row: Int, url: String, description: String?)
    /// Row `row`'s image is the object `hash` of `size` bytes.
    case rowObject(row: Int, hash: Hash128, size: Int64, type: ImageType)
    /// The object `hash` is no longer in the store (evicted or quarantined):
    /// every row that pointed to it is uncached again.
    case objectRemoved(hash: Hash128)
    /// HTTP validators of a feed, for conditional requests: the feed is one
    /// page of unknown URL (`FeedPage.isValidatorsOnly`).
    case validators(feed: Feed, etag: String?, lastModified: String?)
    /// The object `hash` was last used at `time` (milliseconds since the
    /// epoch), for least-recently-used eviction across restarts.
    case access(hash: Hash128, time: Int64)
    /// The posts feed's order from position `start` on is `ids` (start 0
    /// begins a new order). Format version 2.
    case postOrder(start: Int, ids: [PostID])
    /// Page `index` of `feed` (index 0 begins a new page list). Format version 2.
    case page(feed: Feed, index: Int, page: FeedPage)
    /// Row `row`'s image, as mapped by the last `rowObject`, was last answered
    /// with these validators and this lifetime (a 200 or a 304). Format version 3.
    case rowFreshness(row: Int, freshness: ImageFreshness)
    /// The object `hash`'s bytes, cut in chunks of `1 << chunks.shift`, hash
    /// to `chunks.digests`: a range is verified by the chunks it covers.
    /// Logged for objects larger than one chunk. Format version 4.
    case objectChunks(hash: Hash128, chunks: ChunkDigests)
    /// The variant `spec` of the object `source` is the object `variant.object`
    /// (`variant.width` x `variant.height` pixels). Ignored unless `source`
    /// is a known object; dropped with either object. Format version 5.
    case variant(source: Hash128, spec: VariantSpec, variant: VariantRef)
    /// Ends a transaction: the records since the previous commit take effect together.
    case commit

    var typeByte: UInt8 {
        switch self {
        case .post(.int, _): 1
        case .postRemoved(.int): 2
        case .manifestSize: 3
        case .row: 4
        case .rowObject: 5
        case .objectRemoved: 6
        case .validators: 7
        case .access: 8
        case .post(.string, _): 9
        case .postRemoved(.string): 10
        case .postOrder: 11
        case .page: 12
        case .rowFreshness: 13
        case .objectChunks: 14
        case .variant: 15
        case .commit: 0x7F
        }
    }

    /// The oldest format version that holds this record: what the header
    /// of a log holding it must name at least.
    var formatVersion: UInt8 { RecordCodec.formatVersion(ofType: typeByte) }
}

/// Why a record's payload could not be decoded.
public struct RecordDecodingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Whether the payload breaks the format or holds something newer.
    public enum Kind: Sendable, Equatable {
        /// The bytes break the format: a field ends early, a varint
        /// overflows, a count is out of range. Damage (or a writer's bug).
        case malformed
        /// Well-formed bytes this version does not know: a record type, a
        /// value of a field that lists its values (image type, feed, an
        /// `ostring`'s flag), or bytes after the last known field. What a
        /// newer cached writes (docs/storage-format.md, "Format evolution").
        case unknown
    }

    public var kind: Kind
    public var description: String

    /// Malformed bytes, described.
    public init(description: String) {
        kind = .malformed
        self.description = description
    }

    /// Something this version does not know, described.
    static func unknown(_ description: String) -> RecordDecodingError {
        var e = RecordDecodingError(description: description)
        e.kind = .unknown
        return e
    }
}

/// The record framing: `u32 length`, `u32 checksum` (both little-endian), then
/// `length` bytes of payload whose first byte is the record type.
public enum RecordCodec {
    /// The file's first 7 bytes, before the format version byte.
    public static let magic: [UInt8] = Array("CACHEDL".utf8)
    /// The newest format version this daemon reads and writes. A log naming
    /// a higher one was written by a newer cached and is refused untouched
    /// (docs/storage-format.md, "Format evolution").
    public static let formatVersion: UInt8 = 5
    /// The oldest format version there is (every version from it up is read).
    public static let firstFormatVersion: UInt8 = 1
    /// The file's first 8 bytes for format `version`: "CACHEDL" and the version.
    public static func header(version: UInt8) -> [UInt8] { magic + [version] }
    /// The header of the newest format version, `formatVersion`.
    public static let fileHeader: [UInt8] = header(version: formatVersion)
    /// Bytes before each payload.
    public static let frameHeaderSize = 8
    /// A payload longer than this is treated as corruption, not allocated.
    public static let maxPayload = 64 << 20

    /// The format version that introduced record type `type`: 2 for types
    /// 9 to 12, 3 for type 13, 4 for type 14, 5 for type 15, 1 for the
    /// others (an unknown type included: it is refused whatever the header says).
    static func formatVersion(ofType type: UInt8) -> UInt8 {
        switch type {
        case 9...12: 2
        case 13: 3
        case 14: 4
        case 15: 5
        default: 1
        }
    }

    /// Appends the framed record to `out`.
    public static func encode(_ record: LogRecord, into out: inout [UInt8]) {
        var p: [UInt8] = [record.typeByte]
        switch record {
        case let .post(id, json):
            p.putPostIDValue(id); p.putBytes(json)
        case let .postRemoved(id):
            p.putPostIDValue(id)
        case let .manifestSize(count):
            p.putUnsigned(UInt64(count))
        case let .row(row, url, description):
            p.putUnsigned(UInt64(row)); p.putBytes(Array(url.utf8)); p.putOptionalString(description)
        case let .rowObject(row, hash, size, type):
            p.putUnsigned(UInt64(row)); p.append(contentsOf: hash.bytes); p.putUnsigned(UInt64(size)); p.append(type.rawValue)
        case let .objectRemoved(hash):
            p.append(contentsOf: hash.bytes)
        case let .validators(feed, etag, lastModified):
            p.append(feed.rawValue); p.putOptionalString(etag); p.putOptionalString(lastModified)
        case let .access(hash, time):
            p.append(contentsOf: hash.bytes); p.putSigned(time)
        case let .postOrder(start, ids):
            p.putUnsigned(UInt64(start)); p.putUnsigned(UInt64(ids.count))
            for id in ids { p.putPostID(id) }
        case let .page(feed, index, page):
            p.append(feed.rawValue); p.putUnsigned(UInt64(index)); p.putBytes(Array(page.url.utf8))
            p.putOptionalString(page.validators.etag); p.putOptionalString(page.validators.lastModified)
            p.putOptionalString(page.next); p.putUnsigned(UInt64(page.count))
        case let .rowFreshness(row, f):
            p.putUnsigned(UInt64(row)); p.putOptionalString(f.validators.etag); p.putOptionalString(f.validators.lastModified)
            p.putSigned(f.fetched)
            switch f.lifetime {
            case .unstated: p.append(LifetimeKind.unstated)
            case .seconds(let s): p.append(LifetimeKind.seconds); p.putUnsigned(UInt64(max(0, s)))
            case .noCache: p.append(LifetimeKind.noCache)
            case .immutable: p.append(LifetimeKind.immutable)
            }
        case let .objectChunks(hash, chunks):
            p.append(contentsOf: hash.bytes); p.append(chunks.shift); p.putUnsigned(UInt64(chunks.digests.count))
            for d in chunks.digests { p.append(contentsOf: d.bytes) }
        case let .variant(source, spec, v):
            p.append(contentsOf: source.bytes)
            p.putUnsigned(UInt64(spec.width ?? 0)); p.putUnsigned(UInt64(spec.height ?? 0))
            p.append(spec.fit.rawValue); p.append(spec.format.rawValue)
            p.append(contentsOf: v.object.hash.bytes); p.putUnsigned(UInt64(v.object.size)); p.append(v.object.type.rawValue)
            p.putUnsigned(UInt64(v.width)); p.putUnsigned(UInt64(v.height))
        case .commit:
            break
        }
        let checksum = p.withUnsafeBytes { recordChecksum($0) }
        out.putUInt32LE(UInt32(p.count))
        out.putUInt32LE(checksum)
        out.append(contentsOf: p)
    }

    public static func encode(_ record: LogRecord) -> [UInt8] {
        var out: [UInt8] = []
        encode(record, into: &out)
        return out
    }

    /// Decodes one payload (type byte first) found in a log of format
    /// `version`: a type newer than that version is an unknown type there.
    public static func decodePayload(_ p: ArraySlice<UInt8>, version: UInt8 = formatVersion) throws(RecordDecodingError) -> LogRecord {
        var r = PayloadReader(bytes: p)
        let type = try r.byte()
        guard formatVersion(ofType: type) <= version else { throw .unknown("unknown record type \(hex(type))") }
        let record: LogRecord
        switch type {
        case 1: record = .post(id: .int(try r.signed()), json: try r.byteArray())
        case 2: record = .postRemoved(id: .int(try r.signed()))
        case 3: record = .manifestSize(count: try r.count())
        case 4: record = .row(row: try r.count(), url: try r.string(), description: try r.optionalString())
        case 5:
            let row = try r.count()
            let hash = Hash128(bytes: try r.raw(16))
            let size = try r.count()
            let value = try r.byte()
            guard let t = ImageType(rawValue: value) else {
                throw .unknown("unknown image type \(value) in a \(name(ofType: type)) record")
            }
            record = .rowObject(row: row, hash: hash, size: Int64(size), type: t)
        case 6: record = .objectRemoved(hash: Hash128(bytes: try r.raw(16)))
        case 7:
            let feed = try r.feed(in: type)
            record = .validators(feed: feed, etag: try r.optionalString(), lastModified: try r.optionalString())
        case 8: record = .access(hash: Hash128(bytes: try r.raw(16)), time: try r.signed())
        case 9: record = .post(id: try r.stringID(in: type), json: try r.byteArray())
        case 10: record = .postRemoved(id: try r.stringID(in: type))
        case 11: record = try postOrder(&r)
        case 12:
            let feed = try r.feed(in: type)
            let index = try r.count()
            let url = try r.string()
            let validators = Validators(etag: try r.optionalString(), lastModified: try r.optionalString())
            let next = try r.optionalString()
            record = .page(feed: feed, index: index, page: FeedPage(url: url, validators: validators, next: next, count: try r.count()))
        case 13: record = try rowFreshness(&r)
        case 14: record = try objectChunks(&r)
        case 15: record = try variant(&r)
        case 0x7F: record = .commit
        default: throw .unknown("unknown record type \(hex(type))")
        }
        guard r.atEnd else {
            throw .unknown("\(r.bytes.count) bytes after the last known field of a \(name(ofType: type)) record")
        }
        return record
    }

    /// The fields of a `rowFreshness` record (its type byte read).
    private static func rowFreshness(_ r: inout PayloadReader) throws(RecordDecodingError) -> LogRecord {
        let row = try r.count()
        let validators = Validators(etag: try r.optionalString(), lastModified: try r.optionalString())
        let fetched = try r.signed()
        let lifetime: ImageFreshness.Lifetime
        switch try r.byte() {
        case LifetimeKind.unstated: lifetime = .unstated
        case LifetimeKind.seconds:
            let s = try r.unsigned()
            guard s <= UInt64(Int64.max) else { throw RecordDecodingError(description: "lifetime out of range") }
            lifetime = .seconds(Int64(s))
        case LifetimeKind.noCache: lifetime = .noCache
        case LifetimeKind.immutable: lifetime = .immutable
        case let kind: throw .unknown("unknown lifetime kind \(kind) in a \(name(ofType: 13)) record")
        }
        return .rowFreshness(row: row, freshness: ImageFreshness(validators: validators, fetched: fetched, lifetime: lifetime))
    }

    /// The fields of an `objectChunks` record (its type byte read).
    private static func objectChunks(_ r: inout PayloadReader) throws(RecordDecodingError) -> LogRecord {
        let hash = Hash128(bytes: try r.raw(16))
        let shift = try r.byte()
        guard ChunkDigests.knownShifts.contains(shift) else {
            throw .unknown("unknown chunk size 2^\(shift) in an \(name(ofType: 14)) record")
        }
        let n = try r.count()
        // 16 bytes each: a count past what is left is damage, never an allocation.
        guard n <= r.bytes.count / 16 else { throw RecordDecodingError(description: "record ends early") }
        var digests: [Hash128] = []
        digests.reserveCapacity(n)
        for _ in 0..<n { digests.append(Hash128(bytes: try r.raw(16))) }
        return .objectChunks(hash: hash, chunks: ChunkDigests(shift: shift, digests: digests))
    }

    /// The fields of a `variant` record (its type byte read).
    private static func variant(_ r: inout PayloadReader) throws(RecordDecodingError) -> LogRecord {
        let source = Hash128(bytes: try r.raw(16))
        let w = try r.count(), h = try r.count()
        let fitByte = try r.byte(), formatByte = try r.byte()
        guard let fit = VariantFit(rawValue: fitByte), let format = VariantFormat(rawValue: formatByte) else {
            throw .unknown("unknown variant fit \(fitByte) or format \(formatByte) in a \(name(ofType: 15)) record")
        }
        let hash = Hash128(bytes: try r.raw(16))
        let size = try r.count()
        let typeByte = try r.byte()
        guard let type = ImageType(rawValue: typeByte) else {
            throw .unknown("unknown image type \(typeByte) in a \(name(ofType: 15)) record")
        }
        let spec = VariantSpec(width: w == 0 ? nil : w, height: h == 0 ? nil : h, fit: fit, format: format)
        let ref = VariantRef(object: ObjectRef(hash: hash, size: Int64(size), type: type), width: try r.count(), height: try r.count())
        return .variant(source: source, spec: spec, variant: ref)
    }

    /// The fields of a `postOrder` record (its type byte read).
    private static func postOrder(_ r: inout PayloadReader) throws(RecordDecodingError) -> LogRecord {
        let start = try r.count()
        let n = try r.count()
        // Each id takes two bytes at least: a count past that is damage, never an allocation.
        guard n <= r.bytes.count / 2 else { throw RecordDecodingError(description: "record ends early") }
        var ids: [PostID] = []
        ids.reserveCapacity(n)
        for _ in 0..<n { ids.append(try r.postID(in: 11)) }
        return .postOrder(start: start, ids: ids)
    }

    /// The record type's name in docs/storage-format.md, with its byte.
    static func name(ofType type: UInt8) -> String {
        let names: [UInt8: String] = [1: "post", 2: "postRemoved", 3: "manifestSize", 4: "row", 5: "rowObject",
                                      6: "objectRemoved", 7: "validators", 8: "access", 9: "stringPost",
                                      10: "stringPostRemoved", 11: "postOrder", 12: "page", 13: "rowFreshness",
                                      14: "objectChunks", 15: "variant", 0x7F: "commit"]
        return "\(names[type] ?? "unknown") (type \(hex(type)))"
    }

    /// `0x17`: how record types are named in messages.
    static func hex(_ byte: UInt8) -> String {
        let digits = ASCII.lowercaseHexDigits
        return "0x" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
    }
}

