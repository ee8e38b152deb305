/// A post's id as the feed gave it: a JSON integer or a non-empty string of
/// at most `PostID.maxStringBytes` bytes of UTF-8 (docs/protocol.md, "Post
/// ids"). The two kinds never equal each other: the integer 5 and the
/// string "5" are two ids (a feed that switches from one to the other has
/// new posts).
public enum PostID: Hashable, Sendable, CustomStringConvertible {
    case int(Int64)
    case string(String)

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
}
