import CacheHTTP

/// A URL's query parameters set and read by name, for paging by value
/// (docs/protocol.md, "Paging"): the other parameters, their order and
/// their spelling are kept as they are.
enum QueryParameters {
    /// `url` with `name` set to `value` (percent-encoded: every byte but
    /// RFC 3986's unreserved ones), replacing every earlier `name=` and
    /// appending it when absent. Names are compared decoded, and one
    /// already in the URL keeps its spelling (`page[number]` or
    /// `page%5Bnumber%5D`); a new one is written as given, its `[` and `]`
    /// too (JSON:API's `page[cursor]`), other bytes encoded.
    static func setting(_ name: String, to value: String, in url: String) -> String {
        var parts = URIReference.parse(url)
        var pairs = (parts.query ?? "").split(separator: "&", omittingEmptySubsequences: true).map(String.init)
        let matches = pairs.indices.filter { decoded(Substring(key(of: pairs[$0]))) == name }
        if let first = matches.first {
            pairs[first] = key(of: pairs[first]) + "=" + encoded(value)
            let drop = Set(matches.dropFirst())
            pairs = pairs.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        } else {
            pairs.append(encoded(name, keeping: "[]") + "=" + encoded(value))
        }
        parts.query = pairs.joined(separator: "&")
        return parts.text
    }

    /// The value of the first `name=` in `url`'s query (names compared
    /// decoded), percent-decoded; nil when absent.
    static func value(_ name: String, in url: String) -> String? {
        guard let query = URIReference.parse(url).query else { return nil }
        for pair in query.split(separator: "&") where decoded(Substring(key(of: String(pair)))) == name {
            guard let eq = pair.firstIndex(of: "=") else { return "" }
            return decoded(pair[pair.index(after: eq)...])
        }
        return nil
    }

    private static func key(of pair: String) -> String {
        guard let eq = pair.firstIndex(of: "=") else { return pair }
        return String(pair[..<eq])
    }

    /// Every byte but the unreserved ones (RFC 3986: letters, digits, `-._~`) as `%XX`.
    static func encoded(_ s: String, keeping kept: String = "") -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        let keep = Array(kept.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            if ASCIIUnreserved.contains(b) || keep.contains(b) { out.append(b) } else { out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]] }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func decoded(_ s: Substring) -> String {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%"), bytes.count >= 2, let hi = hexValue(bytes[bytes.startIndex]), let lo = hexValue(bytes[bytes.startIndex + 1]) {
                out.append(hi << 4 | lo)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// RFC 3986's unreserved characters: never percent-encoded in a query value.
private enum ASCIIUnreserved {
    static func contains(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
