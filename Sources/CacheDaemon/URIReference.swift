/// RFC 3986 reference resolution (section 5.2), enough for image URLs:
/// scheme, authority, path, query and fragment, with dot segments removed.
enum URIReference {
    struct Parts {
        var scheme: String?
        var authority: String?
        var path: String
        var query: String?
        var fragment: String?

        var text: String {
            var out = ""
            if let scheme { out += scheme + ":" }
            if let authority { out += "//" + authority }
            out += path
            if let query { out += "?" + query }
            if let fragment { out += "#" + fragment }
            return out
        }
    }

    /// Splits a URI reference into its five parts (RFC 3986 appendix B).
    static func parse(_ s: String) -> Parts {
        var rest = Substring(s)
        var parts = Parts(path: "")
        if let hash = rest.firstIndex(of: "#") {
            parts.fragment = String(rest[rest.index(after: hash)...])
            rest = rest[..<hash]
        }
        if let q = rest.firstIndex(of: "?") {
            parts.query = String(rest[rest.index(after: q)...])
            rest = rest[..<q]
        }
        if let colon = rest.firstIndex(of: ":"), let first = rest.first, first.isASCII, first.isLetter,
           rest[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }) {
            parts.scheme = String(rest[..<colon]).lowercased()
            rest = rest[rest.index(after: colon)...]
        }
        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            parts.authority = String(rest[..<end])
            rest = rest[end...]
        }
        parts.path = String(rest)
        return parts
    }

    /// Resolves `reference` against `base`; nil when `reference` is relative and
    /// there is no usable base.
    static func resolve(_ reference: String, against base: String?) -> String? {
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
        guard let slash = base.path.lastIndex(of: "/") else { return path }
        return String(base.path[...slash]) + path
    }

    /// RFC 3986 5.2.4.
    static func removeDotSegments(_ path: String) -> String {
        var input = Substring(path)
        var out = ""
        while !input.isEmpty {
            if input.hasPrefix("../") { input = input.dropFirst(3) }
            else if input.hasPrefix("./") { input = input.dropFirst(2) }
            else if input.hasPrefix("/./") { input = input.dropFirst(2) }
            else if input == "/." { input = "/" }
            else if input.hasPrefix("/../") {
                input = input.dropFirst(3)
                if let last = out.lastIndex(of: "/") { out = String(out[..<last]) } else { out = "" }
            } else if input == "/.." {
                input = "/"
                if let last = out.lastIndex(of: "/") { out = String(out[..<last]) } else { out = "" }
            } else if input == "." || input == ".." {
                input = ""
            } else {
                let start = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[start...].firstIndex(of: "/") ?? input.endIndex
                out += input[..<end]
                input = input[end...]
            }
        }
        return out
    }
}
