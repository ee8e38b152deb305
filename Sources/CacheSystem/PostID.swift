/// A post's id as the feed gave it: a JSON integer or a non-empty string of
/// at most `PostID.maxStringBytes` bytes of UTF-8 (docs/protocol.md, "Post
/// ids"). The two kinds never equal each other: the integer 5 and the
/// string "5" are two ids (a feed that switches from one to the other has
/// new posts).
public enum PostID: Hashable, Sendable, CustomStringConvertible {
    case int(Int64)
    case string(String)

    /// Ids compare byte for byte, as JSON strings do: a precomposed `é` and
    /// `e` with a combining accent are two ids (Swift's `String ==` would
    /// call them one).
    public static func == (a: PostID, b: PostID) -> Bool {
        switch (a, b) {
        case let (.int(x), .int(y)): x == y
        case let (.string(x), .string(y)): x.utf8.elementsEqual(y.utf8)
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        // One call each (an int and a string of the same hash are told apart
        // by `==`): the index of a million posts hashes an id on every lookup,
        // and a byte a call cost a string id of 20 bytes 20 calls.
        case .int(let v): hasher.combine(v)
        case .string(var s): s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// The longest string id accepted, in bytes of UTF-8: 1 KiB.
    public static let maxStringBytes = 1024

    /// A string id, or nil when it is empty or longer than `maxStringBytes`.
    public init?(string s: String) {
        guard !s.isEmpty, s.utf8.count <= Self.maxStringBytes else { return nil }
        self = .string(s)
    }

    /// The integer, when this is an integer id.
    public var integer: Int64? {
        if case .int(let v) = self { v } else { nil }
    }

    /// True for a string id.
    public var isString: Bool {
        if case .string = self { true } else { false }
    }

    /// The integer in decimal, or the string as it is (for messages, quote
    /// it: `json` is the unambiguous form).
    public var description: String {
        switch self {
        case .int(let v): String(v)
        case .string(let s): s
        }
    }

    /// The same spelling as the other kind: `.int(5)` for `"5"` (a decimal
    /// integer as `String(Int64)` writes it: no `+`, no leading zero) and
    /// `"5"` for `.int(5)`; nil for a string that is no such integer.
    public var otherSpelling: PostID? {
        switch self {
        case .int(let v): return .string(String(v))
        case .string(let s):
            guard let v = Int64(s), String(v) == s else { return nil }
            return .int(v)
        }
    }
}

extension PostID: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
    /// `5` as an id: `post(id: 5)`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// `"a1b2"` as an id: `post(id: "a1b2")`.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension PostID: Codable {
    /// A JSON integer or string.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        // Not an integer is not an error yet: a string is tried next, and its error is the one thrown.
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        let s = try c.decode(String.self)
        guard let id = PostID(string: s) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "a post id is an integer or a non-empty string of at most \(PostID.maxStringBytes) bytes")
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .int(let v): try c.encode(v)
        case .string(let s): try c.encode(s)
        }
    }
}
