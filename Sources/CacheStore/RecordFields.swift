import CacheSystem

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

    /// A `u8 feed` field of a record of type `type`.
    mutating func feed(in type: UInt8) throws(RecordDecodingError) -> Feed {
        let value = try byte()
        guard let feed = Feed(rawValue: value) else {
            throw .unknown("unknown feed \(value) in a \(RecordCodec.name(ofType: type)) record")
        }
        return feed
    }

    /// A string post id: `string`, which must be UTF-8 and a valid id (not
    /// empty, at most `PostID.maxStringBytes`). The writer never writes
    /// another: one that passed its checksum is a value this version does
    /// not know, refused like an unknown image type, never cut as damage.
    mutating func stringID(in type: UInt8) throws(RecordDecodingError) -> PostID {
        let bytes = try byteArray()
        guard let s = String(validating: bytes, as: UTF8.self) else {
            throw .unknown("a post id that is not UTF-8 in a \(RecordCodec.name(ofType: type)) record")
        }
        guard let id = PostID(string: s) else {
            throw .unknown("a post id of \(bytes.count) bytes (1 to \(PostID.maxStringBytes) are known) in a \(RecordCodec.name(ofType: type)) record")
        }
        return id
    }

    /// A `postID` field: `u8 kind` (1 integer, 2 string), then `svarint` or a string id.
    mutating func postID(in type: UInt8) throws(RecordDecodingError) -> PostID {
        switch try byte() {
        case PostIDKind.integer: return .int(try signed())
        case PostIDKind.string: return try stringID(in: type)
        case let kind: throw .unknown("unknown post id kind \(kind) in a \(RecordCodec.name(ofType: type)) record")
        }
    }

    mutating func optionalString() throws(RecordDecodingError) -> String? {
        switch try byte() {
        case 0: return nil
        case 1: return try string()
        case let flag: throw .unknown("unknown optional-string flag \(flag)")
        }
    }
}

/// The `u8 lifetime` of a `rowFreshness` record.
enum LifetimeKind {
    static let unstated: UInt8 = 0
    static let seconds: UInt8 = 1
    static let noCache: UInt8 = 2
    static let immutable: UInt8 = 3
}

/// The `u8 kind` of a `postID` field.
enum PostIDKind {
    static let integer: UInt8 = 1
    static let string: UInt8 = 2
}

extension [UInt8] {
    /// A post id's value alone: `svarint` for an integer, `string` for a
    /// string (the record type says which: 1/2 or 9/10).
    mutating func putPostIDValue(_ id: PostID) {
        switch id {
        case .int(let v): putSigned(v)
        case .string(let s): putBytes(Array(s.utf8))
        }
    }

    /// A `postID` field: its kind, then its value.
    mutating func putPostID(_ id: PostID) {
        append(id.isString ? PostIDKind.string : PostIDKind.integer)
        putPostIDValue(id)
    }

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
