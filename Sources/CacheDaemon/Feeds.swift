import CacheProtocol

/// The posts feed, decoded by SPEC section 1's rules.
public struct DecodedPosts: Sendable, Equatable {
    /// Valid posts in feed order: id and the element's JSON text (whitespace removed).
    public var posts: [(id: Int64, json: [UInt8])]
    /// Elements skipped: not an object, missing or non-integer `id`, or a repeated id.
    public var invalid: Int
    /// One line per skipped element, for the log.
    public var problems: [String]

    public static func == (a: DecodedPosts, b: DecodedPosts) -> Bool {
        a.invalid == b.invalid && a.posts.count == b.posts.count &&
            zip(a.posts, b.posts).allSatisfy { $0.id == $1.id && $0.json == $1.json }
    }
}

/// One row of the image manifest.
public struct ManifestEntry: Sendable, Equatable {
    /// The URL as written (possibly relative); empty when the element had none.
    public var url: String
    public var description: String?
}

/// Decoders for the two feeds. They keep what the origin sent: a post is
/// stored as the exact text of its array element (minus insignificant
/// whitespace, so it fits on one protocol line), unknown fields included.
public enum FeedDecoder {
    /// Decodes a posts feed. A body that is not a JSON array throws; bad
    /// elements are skipped and counted.
    public static func posts(_ body: [UInt8]) throws(JSONError) -> DecodedPosts {
        let elements = try JSONParser.parseArrayElements(body)
        var out = DecodedPosts(posts: [], invalid: 0, problems: [])
        var seen = Set<Int64>()
        out.posts.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard case .object = element.value else {
                out.invalid += 1; out.problems.append("element \(index) is not an object"); continue
            }
            guard let idValue = element.value["id"] else {
                out.invalid += 1; out.problems.append("element \(index) has no \"id\""); continue
            }
            guard let id = idValue.integer else {
                out.invalid += 1; out.problems.append("element \(index) has a non-integer \"id\": \(String(decoding: idValue.encoded.prefix(40), as: UTF8.self))"); continue
            }
            guard seen.insert(id).inserted else {
                out.invalid += 1; out.problems.append("element \(index) repeats id \(id)"); continue
            }
            out.posts.append((id, JSONParser.minify(body[element.range])))
        }
        return out
    }

    /// Decodes an image manifest: a JSON array whose positions are the rows.
    /// An element without a string `url` keeps its row but cannot be fetched.
    public static func manifest(_ body: [UInt8]) throws(JSONError) -> [ManifestEntry] {
        let root = try JSONParser.parse(body)
        guard let items = root.array else { throw JSONError(offset: 0, reason: "expected a JSON array") }
        return items.map { item in
            ManifestEntry(url: item["url"]?.string ?? "", description: item["description"]?.string)
        }
    }

    /// Letters, digits and `-_.~/` only, not starting with `/` or `.`, no `..`:
    /// such a reference resolves to the base plus itself (RFC 3986 5.2).
    static func isPlainRelativePath(_ url: String) -> Bool {
        guard let first = url.utf8.first, first != UInt8(ascii: "/"), first != UInt8(ascii: ".") else { return false }
        for b in url.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "/"):
                continue
            default:
                return false
            }
        }
        return !url.contains("/./") && !url.contains("/../") && !url.hasSuffix("/..") && !url.hasSuffix("/.")
    }

    /// The base for relative image URLs: `imagesBaseURL` (as a directory) or
    /// the directory of `imagesURL`.
    public static func baseURL(imagesURL: String?, imagesBaseURL: String?) -> String? {
        if let b = imagesBaseURL { return b.hasSuffix("/") ? b : b + "/" }
        guard let m = imagesURL, let slash = m.lastIndex(of: "/") else { return nil }
        return String(m[...slash])
    }

    /// Resolves a manifest URL against `base` (RFC 3986). Returns nil when the
    /// result is not an http or https URL, which is never fetched.
    public static func resolve(_ url: String, base: String?) -> String? {
        guard !url.isEmpty else { return nil }
        // The common case, a plain relative path under the base, needs no URL parser.
        if let base, base.hasSuffix("/"), isPlainRelativePath(url) { return base + url }
        guard let r = URIReference.resolve(url, against: base) else { return nil }
        let lower = r.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://") ? r : nil
    }
}
