import CacheSystem

/// The `Link` header field (RFC 8288, section 3): how GitHub, WordPress,
/// Mastodon and Discourse say where the next page is.
///
///     Link: <https://api.example/items?page=3>; rel="next", <...?page=9>; rel="last"
public enum LinkHeader {
    /// One link: its target as written (a URI reference, possibly relative)
    /// and its relation types, lowercased.
    public struct Link: Sendable, Equatable {
        public var target: String
        public var relations: [String]

        public init(target: String, relations: [String]) {
            self.target = target
            self.relations = relations
        }
    }

    /// The target of the first link whose `rel` includes `next`, or nil.
    public static func next(_ fieldValue: String) -> String? {
        links(fieldValue).first { $0.relations.contains("next") }?.target
    }

    /// Every well-formed link in a field value (several header lines joined
    /// with commas are one value). A malformed link is skipped up to the
    /// next comma outside `<...>` and quotes.
    public static func links(_ fieldValue: String) -> [Link] {
        var s = Scanner(bytes: Array(fieldValue.utf8))
        var out: [Link] = []
        while !s.atEnd {
            s.skip { $0 == 0x20 || $0 == 0x09 || $0 == UInt8(ascii: ",") }
            guard !s.atEnd else { break }
            if let link = s.link() { out.append(link) } else { s.skipToNextLink() }
        }
        return out
    }

    private struct Scanner {
        var bytes: [UInt8]
        var pos = 0
        var atEnd: Bool { pos >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[pos] }

        mutating func skip(while p: (UInt8) -> Bool) { while let b = peek, p(b) { pos += 1 } }
        mutating func skipSpace() { skip(while: HTTPGrammar.isWhitespace) }

        /// `<target>` then `; param` pairs, up to the comma that ends the link.
        mutating func link() -> Link? {
            guard peek == UInt8(ascii: "<") else { return nil }
            pos += 1
            let start = pos
            skip { $0 != UInt8(ascii: ">") }
            guard !atEnd else { return nil }
            let target = String(decoding: bytes[start..<pos], as: UTF8.self)
            pos += 1
            var relations: [String] = []
            while true {
                skipSpace()
                guard peek == UInt8(ascii: ";") else { break }
                pos += 1
                skipSpace()
                guard let name = token()?.lowercased() else { return nil }
                skipSpace()
                var value = ""
                if peek == UInt8(ascii: "=") {
                    pos += 1
                    skipSpace()
                    // Single quotes are not RFC 8288's, but servers write them
                    // (`rel='next'`) and clients read them (Python requests):
                    // taken as a token, `'next'` would end a walk silently.
                    let v = switch peek {
                    case UInt8(ascii: "\""): quoted()
                    case UInt8(ascii: "'"): singleQuoted()
                    default: token()
                    }
                    guard let v else { return nil }
                    value = v
                }
                // RFC 8288 3.3: a repeated rel is ignored after the first.
                if name == "rel", relations.isEmpty {
                    relations = value.lowercased().split(separator: " ").map(String.init)
                }
            }
            skipSpace()
            guard atEnd || peek == UInt8(ascii: ",") else { return nil }
            return Link(target: target, relations: relations)
        }

        /// An RFC 9110 token.
        mutating func token() -> String? {
            let start = pos
            skip(while: HTTPGrammar.isTokenByte)
            return pos > start ? String(decoding: bytes[start..<pos], as: UTF8.self) : nil
        }

        /// A quoted-string, its escapes undone.
        mutating func quoted() -> String? {
            pos += 1
            var out: [UInt8] = []
            while let b = peek {
                pos += 1
                if b == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
                if b == UInt8(ascii: "\\") {
                    guard let e = peek else { return nil }
                    out.append(e)
                    pos += 1
                } else {
                    out.append(b)
                }
            }
            return nil
        }

        /// A value in single quotes, as written (no escapes).
        mutating func singleQuoted() -> String? {
            pos += 1
            let start = pos
            skip { $0 != UInt8(ascii: "'") }
            guard !atEnd else { return nil }
            defer { pos += 1 }
            return String(decoding: bytes[start..<pos], as: UTF8.self)
        }

        /// Past the comma that ends a malformed link (not one inside `<>` or quotes).
        mutating func skipToNextLink() {
            var inAngle = false, inQuote = false
            while let b = peek {
                pos += 1
                if inQuote {
                    if b == UInt8(ascii: "\\") { pos += 1 } else if b == UInt8(ascii: "\"") { inQuote = false }
                } else if b == UInt8(ascii: "\"") { inQuote = true }
                else if b == UInt8(ascii: "<") { inAngle = true }
                else if b == UInt8(ascii: ">") { inAngle = false }
                else if b == UInt8(ascii: ","), !inAngle { return }
            }
        }
    }
}
