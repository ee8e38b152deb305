import CacheProtocol
import CacheSystem

/// The posts feed, decoded by the rules of docs/protocol.md, "Feeds".
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
    /// the directory of `imagesURL`, read as a browser would (see `resolve`).
    public static func baseURL(imagesURL: String?, imagesBaseURL: String?) -> String? {
        let directory: String
        if let raw = imagesBaseURL {
            let b = URIReference.browserCleaned(raw)
            directory = b.utf8.last == UInt8(ascii: "/") ? b : b + "/"
        } else {
            guard let raw = imagesURL else { return nil }
            let m = URIReference.browserCleaned(raw)
            guard let slash = m.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
            directory = String(m[...slash])
        }
        guard URIReference.parse(directory).scheme != nil, let b = URIReference.resolveLikeABrowser(directory, against: nil) else { return directory }
        return b
    }

    /// Resolves a manifest URL against `base` as a browser resolves a link
    /// (RFC 3986 resolution, read by the WHATWG URL standard's rules: spaces
    /// and control characters trimmed at the ends, tabs and newlines dropped,
    /// `\` as `/`, space, `"`, `<`, `>`, `` ` ``, `{`, `}`, `^`, controls and
    /// non-ASCII percent-encoded as UTF-8, existing `%XX` kept; the host
    /// lowercased, no IDNA). Returns nil when the result is not an http or
    /// https URL, which is never fetched.
    public static func resolve(_ url: String, base: String?) -> String? {
        // The common case, a plain relative path under the base, needs no URL parser.
        if let base, base.utf8.last == UInt8(ascii: "/"), isPlainRelativePath(url) { return base + url }
        // Nothing but spaces and controls is no URL (not a link to the base itself).
        guard !URIReference.browserCleaned(url).isEmpty,
              let r = URIReference.resolveLikeABrowser(url, against: base) else { return nil }
        // An http(s) URL with a host (`resolveLikeABrowser` checked it).
        let parts = URIReference.parse(r)
        guard let scheme = parts.scheme, URLScheme.isHTTP(scheme: scheme), parts.authority != nil else { return nil }
        return r
    }
}
