import CacheSystem
/// Builds compact JSON text into a byte buffer.
public struct JSONWriter {
    public var bytes: [UInt8]

    public init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func raw(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
    public mutating func raw(_ s: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    public mutating func int(_ v: some BinaryInteger) {
        if let small = Int64(exactly: v) { Self.appendDecimal(small, to: &bytes) } else { bytes.append(contentsOf: String(v).utf8) }
    }

    /// Appends `v` in decimal, as `String(v)` spells it, without building a string.
    public static func appendDecimal(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = v.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var n = 20
            repeat {
                n -= 1
                digits[n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[n..<20]))
        }
    }

    public mutating func string(_ s: String) {
        bytes.append(0x22)
        for b in s.utf8 {
            switch b {
            case 0x22: bytes.append(0x5C); bytes.append(0x22)
            case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xf)]])
            default: bytes.append(b)
            }
        }
        bytes.append(0x22)
    }

    public mutating func value(_ v: JSON) {
        switch v {
        case .null: raw("null")
        case .bool(let b): b ? raw("true") : raw("false")
        case .number(let n): bytes.append(contentsOf: n.utf8)
        case .string(let s): string(s)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                value(item)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let pairs):
            bytes.append(UInt8(ascii: "{"))
            for (i, (k, item)) in pairs.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(k)
                bytes.append(UInt8(ascii: ":"))
                value(item)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

/// Writes one JSON object member by member, placing the commas.
public struct JSONObjectWriter {
    public private(set) var writer: JSONWriter
    private var first = true

    public init(capacity: Int = 128) {
        writer = JSONWriter(capacity: capacity)
        writer.raw("{")
    }

    public mutating func key(_ k: StaticString) {
        if !first { writer.raw(",") }
        first = false
        writer.raw("\"")
        writer.raw(k)
        writer.raw("\":")
    }

    public mutating func field(_ k: StaticString, _ v: some BinaryInteger) { key(k); writer.int(v) }
    public mutating func field(_ k: StaticString, _ v: String) { key(k); writer.string(v) }
    public mutating func field(_ k: StaticString, _ v: Bool) { key(k); v ? writer.raw("true") : writer.raw("false") }
    public mutating func field(_ k: StaticString, _ v: JSON) { key(k); writer.value(v) }
    public mutating func field(_ k: StaticString, _ v: String?) {
        key(k)
        if let v { writer.string(v) } else { writer.raw("null") }
    }
    /// A member whose value is already JSON text.
    public mutating func field(_ k: StaticString, rawJSON: some Sequence<UInt8>) { key(k); writer.raw(rawJSON) }
    /// A nested object, or `null` when nil.
    public mutating func field(_ k: StaticString, object: JSONObjectWriter?) {
        key(k)
        if let object { writer.raw(object.finished()) } else { writer.raw("null") }
    }

    /// Appends JSON text as it is, after a `key` (for values built in pieces).
    public mutating func appendRaw(_ b: some Sequence<UInt8>) { writer.raw(b) }

    /// The text with its closing brace and a newline, built in place.
    public consuming func line() -> [UInt8] {
        writer.raw("}\n")
        return writer.bytes
    }

    /// The text with its closing brace.
    public func finished() -> [UInt8] {
        var w = writer
        w.raw("}")
        return w.bytes
    }
}

extension JSONWriter {
    /// A post id as JSON: a number or a string.
    public mutating func postID(_ id: PostID) {
        switch id {
        case .int(let v): int(v)
        case .string(let s): string(s)
        }
    }
}

extension JSONWriter {
    /// The bytes `string(s)` writes, quotes and escapes included, counted
    /// without writing them (a listing's size before it is built).
    public static func length(of s: String) -> Int {
        var n = 2
        for b in s.utf8 {
            switch b {
            case 0x22, 0x5C, 0x0A, 0x0D, 0x09: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }

    /// The bytes `postID(id)` writes.
    public static func length(of id: PostID) -> Int {
        switch id {
        case .int(let v):
            var n = v < 0 ? 2 : 1
            var rest = v.magnitude / 10
            while rest > 0 { n += 1; rest /= 10 }
            return n
        case .string(let s): return length(of: s)
        }
    }
}

extension PostID {
    /// The id as JSON text, for messages: `5` or `"a/b"`.
    public var json: String {
        var w = JSONWriter(capacity: 24)
        w.postID(self)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
