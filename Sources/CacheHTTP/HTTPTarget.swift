/// A request target taken apart: the path's segments and the query, each
/// percent-decoded, with what could reach a path refused outright: an
/// encoded slash or backslash, NUL, a `.` or `..` segment (encoded or not).
/// One segment is let through with encoded slashes and dots: a post's id in
/// `/posts/{id}`, the last segment (an id may be a URL, or `..`), which
/// names a post in memory, never a file. The front-end's routes are a fixed set and never name a file, so nothing
/// here is ever joined to a directory; the refusals keep it that way.
public struct HTTPTarget: Sendable, Equatable {
    public var path: [String]
    public var query: [(name: String, value: String)]
    /// The `host[:port]` of an absolute-form target.
    public var authority: String?

    public static func == (a: HTTPTarget, b: HTTPTarget) -> Bool {
        a.path == b.path && a.query.map(\.name) == b.query.map(\.name) && a.query.map(\.value) == b.query.map(\.value)
            && a.authority == b.authority
    }

    /// Parses an origin-form (`/a/b?q`) or absolute-form (`http://host/a/b?q`) target.
    public static func parse(_ raw: UnsafeRawBufferPointer) throws(HTTPRejection) -> HTTPTarget {
        var bytes = Array(raw)
        for b in bytes where b < 0x21 || b > 0x7E {
            throw HTTPRejection(.badRequest, "a byte that is not visible ASCII in the request target")
        }
        if bytes.contains(UInt8(ascii: "#")) { throw HTTPRejection(.badRequest, "a fragment (#) in the request target") }
        var authority: String?
        if bytes.first != UInt8(ascii: "/") { (bytes, authority) = try stripAuthority(bytes) }
        let q = bytes.firstIndex(of: UInt8(ascii: "?"))
        let pathBytes = bytes[..<(q ?? bytes.count)]
        let queryBytes = q.map { bytes[($0 + 1)...] } ?? []
        var segments: [String] = []
        let rawSegments = pathBytes.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (n, segment) in rawSegments.enumerated() {
            let decoded = try text(segment, plusIsSpace: false)
            let isRawDot = isDotSegment(segment)
            if segments.count == 1, segments[0] == "posts", n == rawSegments.count - 1, !isRawDot, !decoded.isEmpty {
                segments.append(decoded)
                continue
            }
            if decoded.utf8.contains(UInt8(ascii: "/")) || decoded.utf8.contains(UInt8(ascii: "\\")) {
                throw HTTPRejection(.badRequest, "an encoded slash or backslash in the path")
            }
            if isDotSegment(decoded.utf8) {
                throw HTTPRejection(.badRequest, "a dot segment (. or ..) in the path")
            }
            segments.append(decoded)
        }
        var query: [(name: String, value: String)] = []
        for pair in queryBytes.split(separator: UInt8(ascii: "&")) {
            let eq = pair.firstIndex(of: UInt8(ascii: "="))
            let name = try text(pair[..<(eq ?? pair.endIndex)], plusIsSpace: true)
            var value = ""
            if let eq { value = try text(pair[(eq + 1)...], plusIsSpace: true) }
            query.append((name, value))
        }
        return HTTPTarget(path: segments, query: query, authority: authority)
    }

    /// `http://host[:port]/path` → `/path` (`/` when there is none) and `host[:port]`.
    private static func stripAuthority(_ bytes: [UInt8]) throws(HTTPRejection) -> ([UInt8], String) {
        let lower = bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
        for scheme in ["http://", "https://"] where lower.starts(with: Array(scheme.utf8)) {
            let rest = bytes[scheme.utf8.count...]
            let end = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? bytes.count
            let authority = String(decoding: bytes[scheme.utf8.count..<end], as: UTF8.self)
            guard end < bytes.count else { return ([UInt8(ascii: "/")], authority) }
            return (bytes[end] == UInt8(ascii: "/") ? Array(bytes[end...]) : [UInt8(ascii: "/")] + bytes[end...], authority)
        }
        throw HTTPRejection(.badRequest, "the request target is neither a path (/...) nor an http URL")
    }

    /// `.` or `..`.
    private static func isDotSegment<C: Collection<UInt8>>(_ s: C) -> Bool {
        (s.count == 1 || s.count == 2) && s.allSatisfy { $0 == UInt8(ascii: ".") }
    }

    /// `s` percent-decoded (and `+` as a space where `plusIsSpace`) as
    /// UTF-8 text. Bytes with nothing to decode (the caller checked them
    /// visible ASCII) become the string directly, without a decoded copy:
    /// most of every request's segments and query.
    private static func text(_ s: ArraySlice<UInt8>, plusIsSpace: Bool) throws(HTTPRejection) -> String {
        if !s.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) {
            return String(decoding: s, as: UTF8.self)
        }
        return try utf8(try decode(s, plusIsSpace: plusIsSpace))
    }

    private static func decode(_ s: ArraySlice<UInt8>, plusIsSpace: Bool) throws(HTTPRejection) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var i = s.startIndex
        while i < s.endIndex {
            let b = s[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < s.endIndex, let hi = hexValue(s[i + 1]), let lo = hexValue(s[i + 2]) else {
                    throw HTTPRejection(.badRequest, "a % not followed by two hex digits in the request target")
                }
                let v = hi << 4 | lo
                if v == 0 { throw HTTPRejection(.badRequest, "an encoded NUL (%00) in the request target") }
                out.append(v)
                i += 3
            } else {
                out.append(plusIsSpace && b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b)
                i += 1
            }
        }
        return out
    }

    private static func utf8(_ bytes: [UInt8]) throws(HTTPRejection) -> String {
        guard let s = String(validating: bytes, as: UTF8.self) else {
            throw HTTPRejection(.badRequest, "a percent-encoded request target that is not UTF-8")
        }
        return s
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x37
        case 0x61...0x66: return b - 0x57
        default: return nil
        }
    }
}
