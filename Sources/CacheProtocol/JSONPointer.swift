import CacheSystem

/// A JSON Pointer (RFC 6901): `""` is the whole document, `/data/0/id` the
/// member `id` of the first element of the member `data`. `~1` stands for
/// `/` and `~0` for `~` inside a token.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// `/name`: the member `name` of the value.
    public static func member(_ name: String) -> JSONPointer {
        JSONPointer(tokens: [name], description: "/" + escaped(name))
    }

    private init(tokens: [String], description: String) {
        self.tokens = tokens
        self.description = description
    }

    /// The reference tokens, unescaped.
    public let tokens: [String]

    /// The pointer as written (`/links/next`).
    public let description: String

    /// Why a pointer's text is not one.
    public struct SyntaxError: Error, Sendable, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Parses `text`: empty, or `/` followed by tokens separated by `/`, in
    /// which `~` is only ever followed by `0` or `1`.
    public init(_ text: String) throws(SyntaxError) {
        description = text
        guard !text.isEmpty else { tokens = []; return }
        guard text.utf8.first == UInt8(ascii: "/") else {
            throw SyntaxError(description: "a JSON Pointer is empty or begins with \"/\" (RFC 6901), as in /data or /links/next")
        }
        var out: [String] = []
        for raw in text.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            var token: [UInt8] = []
            var tilde = false
            for b in raw {
                if tilde {
                    switch b {
                    case UInt8(ascii: "0"): token.append(UInt8(ascii: "~"))
                    case UInt8(ascii: "1"): token.append(UInt8(ascii: "/"))
                    default: throw SyntaxError(description: "\"~\" in a JSON Pointer must be followed by 0 (for ~) or 1 (for /)")
                    }
                    tilde = false
                } else if b == UInt8(ascii: "~") {
                    tilde = true
                } else {
                    token.append(b)
                }
            }
            if tilde { throw SyntaxError(description: "a JSON Pointer token ends with \"~\"; write ~0 for ~ and ~1 for /") }
            out.append(String(decoding: token, as: UTF8.self))
        }
        tokens = out
    }

    /// `token` written as a pointer token: `~` as `~0`, `/` as `~1`.
    public static func escaped(_ token: String) -> String {
        var out: [UInt8] = []
        for b in token.utf8 {
            switch b {
            case UInt8(ascii: "~"): out += [UInt8(ascii: "~"), UInt8(ascii: "0")]
            case UInt8(ascii: "/"): out += [UInt8(ascii: "~"), UInt8(ascii: "1")]
            default: out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The index an array token names: `0` or digits without a leading zero.
    public static func index(_ token: String) -> Int? {
        guard let first = token.utf8.first, token.utf8.allSatisfy(ASCII.isDigit),
              first != UInt8(ascii: "0") || token.utf8.count == 1, token.utf8.count <= 18 else { return nil }
        return Int(token)
    }

    /// The value the pointer names in `root`, or nil when it names nothing
    /// (a missing member, an index past the end, a token into a scalar).
    public func resolve(in root: JSON) -> JSON? { Self.resolve(tokens, in: root) }

    /// The value `tokens` name in `root` (see `resolve(in:)`).
    public static func resolve(_ tokens: [String], in root: JSON) -> JSON? {
        var current = root
        for token in tokens {
            guard let next = step(current, token) else { return nil }
            current = next
        }
        return current
    }

    private static func step(_ value: JSON, _ token: String) -> JSON? {
        switch value {
        case .object: return value[token]
        case .array(let items): return index(token).flatMap { $0 < items.count ? items[$0] : nil }
        default: return nil
        }
    }

    /// Why the pointer names nothing in `root`, for messages: `/data is an
    /// object with no member "items"`. Nil when it names a value.
    public func whyNothing(in root: JSON) -> String? {
        var current = root
        var prefix = ""
        for token in tokens {
            guard let next = Self.step(current, token) else {
                let at = prefix.isEmpty ? "the document" : prefix
                switch current {
                case .object: return "\(at) is an object with no member \(Self.quoted(token))"
                case .array(let a): return "\(at) is an array of \(a.count), with no element \(Self.quoted(token))"
                default: return "\(at) is \(current.kindName)"
                }
            }
            current = next
            prefix += "/" + Self.escaped(token)
        }
        return nil
    }

    private static func quoted(_ s: String) -> String {
        var w = JSONWriter()
        w.string(s)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}

extension JSON {
    /// What a value is, for messages: `an object`, `a string`, `null`.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
