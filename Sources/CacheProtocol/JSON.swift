import CacheSystem

/// A parsed JSON value. Objects keep their key order; numbers keep their text.
public indirect enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    /// The number exactly as written, for example `"42"` or `"1.5e3"`.
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value of `key` in an object (the last one if repeated).
    public subscript(key: String) -> JSON? {
        guard case .object(let pairs) = self else { return nil }
        return pairs.last { $0.0 == key }?.1
    }

    /// An integer written without fraction or exponent that fits in Int64.
    public var integer: Int64? {
        guard case .number(let text) = self, !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) else { return nil }
        return Int64(text)
    }

    public var double: Double? {
        guard case .number(let text) = self else { return nil }
        return Double(text)
    }

    public var string: String? {
        guard case .string(let s) = self else { return nil }
        return s
    }

    public var bool: Bool? {
        guard case .bool(let b) = self else { return nil }
        return b
    }

    public var array: [JSON]? {
        guard case .array(let a) = self else { return nil }
        return a
    }

    public var isNull: Bool { self == .null }

    /// True for an object.
    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// Compact JSON text of this value.
    public var encoded: [UInt8] {
        var w = JSONWriter()
        w.value(self)
        return w.bytes
    }
}

/// Where and why JSON text was rejected.
public struct JSONError: Error, CustomStringConvertible, Sendable, Equatable {
    public var offset: Int
    public var reason: String
    /// Set when the captured array held more elements than the parse
    /// allowed (`parseDocument`'s `maxElements`): that bound.
    public var elementLimit: Int?
    /// Set when the parse gave up because the daemon is stopping
    /// (`StopFlag.current`), not because of the bytes.
    public var stopped = false
    public init(offset: Int, reason: String, elementLimit: Int? = nil) {
        self.offset = offset
        self.reason = reason
        self.elementLimit = elementLimit
    }
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser over bytes, with a nesting limit.
public struct JSONParser {
    /// The deepest nesting of arrays and objects accepted. Default 64.
    public static let defaultMaxDepth = 64
    /// The longest number read, in characters (sign, digits, fraction and exponent).
    public static let maxNumberLength = 400

    let bytes: UnsafeRawBufferPointer
    var pos = 0
    let maxDepth: Int
    /// The most elements the captured array may hold (`parseDocument`).
    var maxElements = Int.max
    /// Where the stop flag (`StopFlag.current`) is next looked at: every
    /// `StopFlag.bytesBetweenLooks` bytes read, at the next element or
    /// member, whatever the document's shape (a feed whose items' array is
    /// small beside a gigabyte of other values gives up as promptly as a
    /// large items' array). A request line never reaches the first look.
    var nextLook = StopFlag.bytesBetweenLooks

    init(_ bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Parses one JSON value that must make up all of `bytes` (surrounding
    /// whitespace allowed).
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSON {
        try withParser(bytes, maxDepth: maxDepth) { (p) throws(JSONError) -> JSON in
            p.skipWhitespace()
            let v = try p.value(depth: 0)
            try p.expectEnd()
            return v
        }
    }

    /// Parses a top-level object, returning each member with the byte range of its value.
    public static func parseObjectMembers(_ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> [(key: String, value: JSON, range: Range<Int>)] {
        try withParser(bytes, maxDepth: maxDepth) { (p) throws(JSONError) -> [(key: String, value: JSON, range: Range<Int>)] in
            p.skipWhitespace()
            guard p.peek() == UInt8(ascii: "{") else { throw p.error("expected a JSON object") }
            p.pos += 1
            var out: [(key: String, value: JSON, range: Range<Int>)] = []
            p.skipWhitespace()
            if p.peek() == UInt8(ascii: "}") { p.pos += 1; try p.expectEnd(); return out }
            while true {
                p.skipWhitespace()
                guard p.peek() == UInt8(ascii: "\"") else { throw p.error("expected a string key") }
                let key = try p.string()
                p.skipWhitespace()
                guard p.peek() == UInt8(ascii: ":") else { throw p.error("expected ':' after key") }
                p.pos += 1
                p.skipWhitespace()
                let start = p.pos
                let v = try p.value(depth: 1)
                out.append((key, v, start..<p.pos))
                p.skipWhitespace()
                switch p.peek() {
                case UInt8(ascii: ","): p.pos += 1
                case UInt8(ascii: "}"): p.pos += 1; try p.expectEnd(); return out
                default: throw p.error("expected ',' or '}' in object")
                }
            }
        }
    }
    static func withParser<R>(_ bytes: some Collection<UInt8>, maxDepth: Int,
                                      _ body: (inout JSONParser) throws(JSONError) -> R) throws(JSONError) -> R {
        var result: Result<R, JSONError>?
        let run = { (raw: UnsafeBufferPointer<UInt8>) in
            var p = JSONParser(UnsafeRawBufferPointer(raw), maxDepth: maxDepth)
            result = Result { () throws(JSONError) -> R in try body(&p) }
        }
        if bytes.withContiguousStorageIfAvailable(run) == nil {
            Array(bytes).withUnsafeBufferPointer(run)
        }
        return try result!.get()
    }

    func error(_ reason: String) -> JSONError { JSONError(offset: pos, reason: reason) }

    func peek() -> UInt8? { pos < bytes.count ? bytes[pos] : nil }

    mutating func skipWhitespace() {
        while pos < bytes.count {
            let b = bytes[pos]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            pos += 1
        }
    }

    mutating func expectEnd() throws(JSONError) {
        skipWhitespace()
        if pos != bytes.count { throw error("unexpected bytes after the value") }
    }

    /// Throws `stoppedError` when `nextLook` is passed and the daemon stops.
    @inline(__always)
    mutating func lookAtStopFlag() throws(JSONError) {
        if pos >= nextLook { try lookNow() }
    }

    mutating func lookNow() throws(JSONError) {
        nextLook = pos + StopFlag.bytesBetweenLooks
        if StopFlag.current?.isRaised == true { throw stoppedError() }
    }

    /// The parse given up because the daemon stops (`JSONError.stopped`).
    func stoppedError() -> JSONError {
        var stopped = JSONError(offset: pos, reason: "the parse was stopped: the daemon is stopping")
        stopped.stopped = true
        return stopped
    }

    mutating func value(depth: Int) throws(JSONError) -> JSON {
        guard let b = peek() else { throw error("unexpected end of input") }
        switch b {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
            pos += 1
            var pairs: [(String, JSON)] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "}") { pos += 1; return .object(pairs) }
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let key = try string()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after key") }
                pos += 1
                skipWhitespace()
                try lookAtStopFlag()
                pairs.append((key, try value(depth: depth + 1)))
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case UInt8(ascii: "}"): pos += 1; return .object(pairs)
                default: throw error("expected ',' or '}' in object")
                }
            }
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
            pos += 1
            var items: [JSON] = []
            skipWhitespace()
            if peek() == UInt8(ascii: "]") { pos += 1; return .array(items) }
            while true {
                skipWhitespace()
                try lookAtStopFlag()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                switch peek() {
                case UInt8(ascii: ","): pos += 1
                case UInt8(ascii: "]"): pos += 1; return .array(items)
                default: throw error("expected ',' or ']' in array")
                }
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try number())
        default:
            throw error("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard pos + n <= bytes.count else { throw error("unexpected end of input") }
        for i in 0..<n where bytes[pos + i] != word.utf8Start[i] { throw error("invalid literal") }
        pos += n
    }

    mutating func number() throws(JSONError) -> String {
        let start = pos
        try skipNumber()
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
    }

    /// Moves past a number, checking its grammar and its length.
    mutating func skipNumber() throws(JSONError) {
        let start = pos
        func digit(_ b: UInt8?) -> Bool { b.map(ASCII.isDigit) ?? false }
        if peek() == UInt8(ascii: "-") { pos += 1 }
        if peek() == UInt8(ascii: "0") { pos += 1 }
        else if digit(peek()) { while digit(peek()) { pos += 1 } }
        else { throw error("invalid number") }
        if peek() == UInt8(ascii: ".") {
            pos += 1
            guard digit(peek()) else { throw error("invalid number") }
            while digit(peek()) { pos += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            pos += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { pos += 1 }
            guard digit(peek()) else { throw error("invalid number") }
            while digit(peek()) { pos += 1 }
        }
        guard pos - start <= Self.maxNumberLength else {
            throw error("a number of \(pos - start) characters, more than the \(Self.maxNumberLength) this parser reads (RFC 8259, section 9, lets a parser bound them)")
        }
    }

    /// The scalar of a `\u` escape whose `u` was just read: a surrogate
    /// pair is read whole (`\uD83D\uDE00`), a lone surrogate refused.
    /// What `string()` decodes and `skipString` checks, alike.
    mutating func unicodeEscape() throws(JSONError) -> UInt32 {
        let scalar = try hex4()
        if scalar >= 0xD800 && scalar < 0xDC00 {
            guard pos + 2 <= bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u") else {
                throw error("unpaired surrogate")
            }
            pos += 2
            let low = try hex4()
            guard low >= 0xDC00 && low < 0xE000 else { throw error("unpaired surrogate") }
            return 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        if scalar >= 0xDC00 && scalar < 0xE000 { throw error("unpaired surrogate") }
        return scalar
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard pos + 4 <= bytes.count else { throw error("unexpected end of input in \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[pos]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            default: throw error("invalid \\u escape")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    mutating func string() throws(JSONError) -> String {
        pos += 1  // opening quote
        let start = pos
        // Fast path: no escapes.
        while pos < bytes.count {
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<pos])
                guard let s = String(validating: raw.bindMemory(to: UInt8.self), as: UTF8.self) else {
                    throw error("invalid UTF-8 in string")
                }
                pos += 1
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw error("control character in string") }
            pos += 1
        }
        var out = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<pos]))
        while true {
            guard pos < bytes.count else { throw error("unterminated string") }
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") { pos += 1; break }
            if b < 0x20 { throw error("control character in string") }
            if b != UInt8(ascii: "\\") { out.append(b); pos += 1; continue }
            pos += 1
            guard let e = peek() else { throw error("unterminated escape") }
            pos += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard let u = Unicode.Scalar(try unicodeEscape()) else { throw error("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default:
                throw error("invalid escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in string") }
        return s
    }
}
