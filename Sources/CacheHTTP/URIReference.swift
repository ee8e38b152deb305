import CacheSystem

/// RFC 3986 reference resolution (section 5.2), enough for image URLs:
/// scheme, authority, path, query and fragment, with dot segments removed;
/// and the browser's reading of a URL around it (`resolveLikeABrowser`).
public enum URIReference {
    /// A reference's five components (RFC 3986 section 3), nil where absent.
    public struct Parts: Sendable {
        public var scheme: String?
        public var authority: String?
        public var path: String
        public var query: String?
        public var fragment: String?

        /// The components put back together (section 5.3).
        public var text: String {
            var out = ""
            if let scheme { out += scheme + ":" }
            if let authority { out += "//" + authority }
            out += path
            if let query { out += "?" + query }
            if let fragment { out += "#" + fragment }
            return out
        }
    }

    /// Resolves `reference` against `base` as a browser reads a URL in a page
    /// (the WHATWG URL standard), for http and https: leading and trailing C0
    /// controls and spaces are trimmed, tabs and newlines removed anywhere, a
    /// backslash before the query counts as `/`, and what a browser
    /// percent-encodes is encoded as UTF-8 `%XX` (path, query and fragment
    /// sets; `%` itself never, so existing escapes stay). The host is
    /// lowercased (ASCII only: no IDNA), a default port and an empty one are
    /// dropped, an empty path becomes `/`.
    public static func resolveLikeABrowser(_ reference: String, against base: String?) -> String? {
        var cleaned = browserCleaned(reference)
        let cleanBase = base.map(browserCleaned)
        // A special scheme takes any number of slashes before its host
        // (`http:/h/x`, `http:///h/x`), and with none or one on a base of the
        // same scheme it is a relative reference (`http:x.png`, `http:/x.png`).
        if let scheme = parse(cleaned).scheme, URLScheme.isHTTP(scheme: scheme) {
            let rest = cleaned.utf8.dropFirst(scheme.utf8.count + 1)
            let slashes = rest.prefix { $0 == UInt8(ascii: "/") }.count
            let tail = String(decoding: rest.dropFirst(slashes), as: UTF8.self)
            if slashes < 2, let cleanBase, parse(cleanBase).scheme == scheme {
                cleaned = String(decoding: rest, as: UTF8.self)
            } else {
                cleaned = scheme + "://" + tail
            }
        }
        guard let resolved = resolve(cleaned, against: cleanBase), let parts = normalized(parse(resolved)) else { return nil }
        return parts.text
    }

    /// The WHATWG URL parser's preprocessing, on bytes: C0 controls and
    /// spaces trimmed at both ends, ASCII tab, LF and CR removed everywhere,
    /// and `\` read as `/` before the first `?` or `#` (special schemes).
    public static func browserCleaned(_ s: String) -> String {
        let bytes = Array(s.utf8)
        var start = 0, end = bytes.count
        while start < end && bytes[start] <= 0x20 { start += 1 }
        while end > start && bytes[end - 1] <= 0x20 { end -= 1 }
        var out: [UInt8] = []
        out.reserveCapacity(end - start)
        var beforeQuery = true
        for b in bytes[start..<end] {
            switch b {
            case 0x09, 0x0A, 0x0D: continue
            case UInt8(ascii: "?"), UInt8(ascii: "#"): beforeQuery = false; out.append(b)
            case UInt8(ascii: "\\") where beforeQuery: out.append(UInt8(ascii: "/"))
            default: out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The WHATWG percent-encode sets this resolver uses.
    enum EncodeSet {
        case userinfo, path, specialQuery, fragment

        func contains(_ b: UInt8) -> Bool {
            // The C0 control percent-encode set: C0 controls, DEL and every non-ASCII byte.
            if b < 0x20 || b > 0x7E { return true }
            switch self {
            case .fragment: return " \"<>`".utf8.contains(b)
            case .specialQuery: return " \"#<>'".utf8.contains(b)
            case .path: return " \"#<>?^`{}".utf8.contains(b)
            case .userinfo: return " \"#<>?^`{}/:;=@[\\]|".utf8.contains(b)
            }
        }
    }

    /// `s` with every byte in `set` written as `%XX` (uppercase hex).
    static func percentEncoded(_ s: String, _ set: EncodeSet) -> String {
        let bytes = Array(s.utf8)
        guard bytes.contains(where: set.contains) else { return s }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        for b in bytes {
            if set.contains(b) { out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]] } else { out.append(b) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An absolute http(s) URL's parts as a browser serialises them (see
    /// `resolveLikeABrowser`), or nil when its host or port is not one: an
    /// empty host, a port that is not a number up to 65535, or a host with a
    /// character no host name has (ASCII other than letters, digits and
    /// `-._~!$&'()*+,;=`, or a malformed `[IPv6]`). Non-ASCII host names
    /// are kept as written: converting them (IDNA) is left to libcurl.
    static func normalized(_ parts: Parts) -> Parts? {
        var p = parts
        p.path = percentEncoded(p.path, .path)
        p.query = p.query.map { percentEncoded($0, .specialQuery) }
        p.fragment = p.fragment.map { percentEncoded($0, .fragment) }
        guard let authority = p.authority else { return p }
        var userinfo: Substring?
        var hostPort = Substring(authority)
        if let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) {
            userinfo = authority[..<at]
            hostPort = authority[authority.utf8.index(after: at)...]
        }
        // The port follows the last colon outside an IPv6 literal's brackets.
        var host = hostPort, port: Substring?
        if let colon = hostPort.utf8.lastIndex(of: UInt8(ascii: ":")),
           !hostPort[colon...].utf8.contains(UInt8(ascii: "]")) {
            host = hostPort[..<colon]
            port = hostPort[hostPort.utf8.index(after: colon)...]
        }
        guard isHost(host) else { return nil }
        if let port, !port.isEmpty {
            guard port.utf8.count <= 5, port.utf8.allSatisfy(ASCII.isDigit), let n = Int(port), n <= 65535 else { return nil }
        }
        let defaultPort = p.scheme == "https" ? 443 : p.scheme == "http" ? 80 : nil
        var out = ""
        if let userinfo {
            let user = userinfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            out += percentEncoded(String(user[0]), .userinfo)
            if user.count > 1 { out += ":" + percentEncoded(String(user[1]), .userinfo) }
            out += "@"
        }
        out += String(decoding: host.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        // Leading zeros are the same port; a browser writes it without them.
        if let port, let n = Int(port), n != defaultPort { out += ":\(n)" }
        p.authority = out
        if p.path.isEmpty { p.path = "/" }
        return p
    }

    /// A registered name (with non-ASCII allowed, for libcurl's IDNA) or a
    /// bracketed IPv6 literal.
    static func isHost(_ host: Substring) -> Bool {
        let bytes = host.utf8
        guard let first = bytes.first else { return false }
        if first == UInt8(ascii: "[") {
            guard bytes.count > 2, bytes.last == UInt8(ascii: "]") else { return false }
            return bytes.dropFirst().dropLast().allSatisfy {
                ASCII.isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".")
            }
        }
        return bytes.allSatisfy { b in
            b >= 0x80 || isASCIILetter(b) || ASCII.isDigit(b) || "-._~!$&'()*+,;=".utf8.contains(b)
        }
    }

    /// Splits a URI reference into its five parts (RFC 3986 appendix B).
    /// Delimiters are found in the UTF-8 bytes: a `#` or `/` followed by a
    /// combining mark is one `Character` in Swift, but still a delimiter.
    public static func parse(_ s: String) -> Parts {
        var rest = Substring(s)
        var parts = Parts(path: "")
        if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) {
            parts.fragment = String(rest[rest.utf8.index(after: hash)...])
            rest = rest[..<hash]
        }
        if let q = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
            parts.query = String(rest[rest.utf8.index(after: q)...])
            rest = rest[..<q]
        }
        if let colon = rest.utf8.firstIndex(of: UInt8(ascii: ":")), let first = rest.utf8.first, isASCIILetter(first),
           rest.utf8[..<colon].allSatisfy({ isASCIILetter($0) || ASCII.isDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }) {
            parts.scheme = String(rest[..<colon]).lowercased()
            rest = rest[rest.utf8.index(after: colon)...]
        }
        if rest.utf8.starts(with: "//".utf8) {
            rest = rest[rest.utf8.index(rest.startIndex, offsetBy: 2)...]
            let end = rest.utf8.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
            parts.authority = String(rest[..<end])
            rest = rest[end...]
        }
        parts.path = String(rest)
        return parts
    }

    private static func isASCIILetter(_ b: UInt8) -> Bool { ASCII.isLetter(b) }

    /// Resolves `reference` against `base`; nil when `reference` is relative and
    /// there is no usable base.
    public static func resolve(_ reference: String, against base: String?) -> String? {
        let r = parse(reference)
        if r.scheme != nil {
            var t = r
            t.path = removeDotSegments(r.path)
            return t.text
        }
        guard let base else { return nil }
        let b = parse(base)
        guard b.scheme != nil else { return nil }
        var t = Parts(scheme: b.scheme, path: "", fragment: r.fragment)
        if r.authority != nil {
            t.authority = r.authority
            t.path = removeDotSegments(r.path)
            t.query = r.query
        } else {
            t.authority = b.authority
            if r.path.isEmpty {
                t.path = b.path
                t.query = r.query ?? b.query
            } else {
                if r.path.hasPrefix("/") {
                    t.path = removeDotSegments(r.path)
                } else {
                    t.path = removeDotSegments(merge(base: b, path: r.path))
                }
                t.query = r.query
            }
        }
        return t.text
    }

    private static func merge(base: Parts, path: String) -> String {
        if base.authority != nil && base.path.isEmpty { return "/" + path }
        guard let slash = base.path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(base.path[...slash]) + path
    }

    /// RFC 3986 5.2.4, on the path's bytes.
    static func removeDotSegments(_ path: String) -> String {
        var input = Array(path.utf8)[...]
        var out: [UInt8] = []
        func starts(_ p: String) -> Bool { input.starts(with: p.utf8) }
        func equals(_ p: String) -> Bool { input.elementsEqual(p.utf8) }
        func dropLastSegment() {
            if let last = out.lastIndex(of: UInt8(ascii: "/")) { out.removeSubrange(last...) } else { out.removeAll() }
        }
        while !input.isEmpty {
            if starts("../") { input = input.dropFirst(3) }
            else if starts("./") { input = input.dropFirst(2) }
            else if starts("/./") { input = input.dropFirst(2) }
            else if equals("/.") { input = Array("/".utf8)[...] }
            else if starts("/../") { input = input.dropFirst(3); dropLastSegment() }
            else if equals("/..") { input = Array("/".utf8)[...]; dropLastSegment() }
            else if equals(".") || equals("..") { input = [] }
            else {
                let start = input.first == UInt8(ascii: "/") ? input.startIndex + 1 : input.startIndex
                let end = input[start...].firstIndex(of: UInt8(ascii: "/")) ?? input.endIndex
                out += input[..<end]
                input = input[end...]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
