import CacheSystem
/// Which feed a validator record belongs to.
public enum Feed: UInt8, Sendable, CaseIterable {
    case posts = 1, manifest = 2
}

/// One entry of `index.log`. The store's state is what replaying these in
/// order produces; docs/storage-format.md describes the bytes.
public enum LogRecord: Equatable, Sendable {
    /// Post `id` now has these exact bytes (what the origin sent for it).
    case post(id: Int64, json: [UInt8])
    /// Post `id` is gone upstream (a tombstone).
    case postRemoved(id: Int64)
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
    /// HTTP validators of a feed, for conditional requests.
    case validators(feed: Feed, etag: String?, lastModified: String?)
    /// The object `hash` was last used at `time` (milliseconds since the
    /// epoch), for least-recently-used eviction across restarts.
    case access(hash: Hash128, time: Int64)
    /// Ends a transaction: the records since the previous commit take effect together.
    case commit

    var typeByte: UInt8 {
        switch self {
        case .post: 1
        case .postRemoved: 2
        case .manifestSize: 3
        case .row: 4
        case .rowObject: 5
        case .objectRemoved: 6
        case .validators: 7
        case .access: 8
        case .commit: 0x7F
        }
    }
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
    /// The newest format version this daemon reads, and the one it writes.
    /// A log naming a higher one was written by a newer cached and is
    /// refused untouched (docs/storage-format.md, "Format evolution").
    public static let formatVersion: UInt8 = 1
    /// The file's first 8 bytes: "CACHEDL" and format version 1.
    public static let fileHeader: [UInt8] = magic + [formatVersion]
    /// Bytes before each payload.
    public static let frameHeaderSize = 8
    /// A payload longer than this is treated as corruption, not allocated.
    public static let maxPayload = 64 << 20

    /// Appends the framed record to `out`.
    public static func encode(_ record: LogRecord, into out: inout [UInt8]) {
        var p: [UInt8] = [record.typeByte]
        switch record {
        case let .post(id, json):
            p.putSigned(id); p.putBytes(json)
        case let .postRemoved(id):
            p.putSigned(id)
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

    /// Decodes one payload (type byte first).
    public static func decodePayload(_ p: ArraySlice<UInt8>) throws(RecordDecodingError) -> LogRecord {
        var r = PayloadReader(bytes: p)
        let type = try r.byte()
        let record: LogRecord
        switch type {
        case 1: record = .post(id: try r.signed(), json: try r.byteArray())
        case 2: record = .postRemoved(id: try r.signed())
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
            let value = try r.byte()
            guard let feed = Feed(rawValue: value) else {
                throw .unknown("unknown feed \(value) in a \(name(ofType: type)) record")
            }
            record = .validators(feed: feed, etag: try r.optionalString(), lastModified: try r.optionalString())
        case 8: record = .access(hash: Hash128(bytes: try r.raw(16)), time: try r.signed())
        case 0x7F: record = .commit
        default: throw .unknown("unknown record type \(hex(type))")
        }
        guard r.atEnd else {
            throw .unknown("\(r.bytes.count) bytes after the last known field of a \(name(ofType: type)) record")
        }
        return record
    }

    /// The record type's name in docs/storage-format.md, with its byte.
    static func name(ofType type: UInt8) -> String {
        let names: [UInt8: String] = [1: "post", 2: "postRemoved", 3: "manifestSize", 4: "row", 5: "rowObject",
                                      6: "objectRemoved", 7: "validators", 8: "access", 0x7F: "commit"]
        return "\(names[type] ?? "unknown") (type \(hex(type)))"
    }

    /// `0x17`: how record types are named in messages.
    static func hex(_ byte: UInt8) -> String {
        let digits = ASCII.lowercaseHexDigits
        return "0x" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
    }
}

/// Reads the fields of one payload; every read is bounds-checked.
struct PayloadReader {
    var bytes: ArraySlice<UInt8>

    var atEnd: Bool { bytes.isEmpty }

    mutating func byte() throws(RecordDecodingError) -> UInt8 {
        guard let b = bytes.popFirst() else { throw RecordDecodingError(description: "record ends early") }
        return b
    }

    mutating func raw(_ n: Int) throws(RecordDecodingError) -> ArraySlice<UInt8> {
        guard bytes.count >= n else { throw RecordDecodingError(description: "record ends early") }
        let out = bytes.prefix(n)
        bytes = bytes.dropFirst(n)
        return out
    }

    mutating func unsigned() throws(RecordDecodingError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, !(shift == 63 && b > 1) else { throw RecordDecodingError(description: "varint overflow") }
            value |= UInt64(b & 0x7f) << shift
            if b & 0x80 == 0 { return value }
            shift += 7
        }
    }

    mutating func count() throws(RecordDecodingError) -> Int {
        let v = try unsigned()
        guard v <= UInt64(Int32.max) * 1024 else { throw RecordDecodingError(description: "count out of range") }
        return Int(v)
    }

    mutating func signed() throws(RecordDecodingError) -> Int64 {
        let u = try unsigned()
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    mutating func byteArray() throws(RecordDecodingError) -> [UInt8] {
        let n = try count()
        return Array(try raw(n))
    }

    mutating func string() throws(RecordDecodingError) -> String {
        String(decoding: try byteArray(), as: UTF8.self)
    }

    mutating func optionalString() throws(RecordDecodingError) -> String? {
        switch try byte() {
        case 0: return nil
        case 1: return try string()
        case let flag: throw .unknown("unknown optional-string flag \(flag)")
        }
    }
}

extension [UInt8] {
    mutating func putUInt32LE(_ v: UInt32) {
        for i in 0..<4 { append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }

    mutating func putUnsigned(_ v: UInt64) {
        var v = v
        while v >= 0x80 { append(UInt8(v & 0x7f) | 0x80); v >>= 7 }
        append(UInt8(v))
    }

    mutating func putSigned(_ v: Int64) {
        putUnsigned(UInt64(bitPattern: (v << 1) ^ (v >> 63)))
    }

    mutating func putBytes(_ b: [UInt8]) {
        putUnsigned(UInt64(b.count)); append(contentsOf: b)
    }

    mutating func putOptionalString(_ s: String?) {
        if let s { append(1); putBytes(Array(s.utf8)) } else { append(0) }
    }
}

extension ArraySlice<UInt8> {
    func uint32LE(at offset: Int) -> UInt32 {
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(self[startIndex + offset + i]) << (8 * UInt32(i)) }
        return v
    }
}
