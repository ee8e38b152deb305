import CacheHTTP
import CacheProtocol
import CacheSystem

/// How the image manifest's URLs are read: relative ones resolved as a
/// browser resolves links (docs/protocol.md, "Feeds").
extension FeedDecoder {
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
