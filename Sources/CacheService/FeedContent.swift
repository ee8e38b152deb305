import CacheSystem

/// What a feed's answer is, from its `Content-Type` and its first bytes
/// (docs/protocol.md, "Feeds"): JSON, RSS or Atom are read; HTML is refused.
enum FeedContent {
    /// The `Accept` sent for every feed page unless a `fetch-header` sets
    /// one: JSON Feed first, then JSON, Atom and RSS, XML, anything else last
    /// (an API that answers HTML to a browser's `*/*` answers JSON to this).
    static let accept = "Accept: application/feed+json, application/json;q=0.9, application/atom+xml;q=0.8, "
        + "application/rss+xml;q=0.8, application/xml;q=0.7, */*;q=0.1"

    /// The body after a UTF-8 byte order mark and white space: where its
    /// first byte tells JSON (`[`, `{`) from markup (`<`).
    /// `body` with a leading UTF-8 byte order mark turned into spaces (the
    /// same length, so offsets into it are the body's); `body` itself, not
    /// copied, when it has none.
    static func blankingByteOrderMark(_ body: [UInt8]) -> [UInt8] {
        guard body.starts(with: [0xEF, 0xBB, 0xBF]) else { return body }
        var blanked = body
        blanked.replaceSubrange(0..<3, with: [0x20, 0x20, 0x20])
        return blanked
    }

    /// Why a body that starts with a UTF-16 byte order mark and is declared
    /// JSON is refused (JSON between systems is UTF-8, RFC 8259 8.1): nil
    /// for any other body, which XML may still read in UTF-16.
    static func utf16JSONRefusal(_ body: [UInt8], contentType: String?) -> String? {
        guard body.starts(with: [0xFF, 0xFE]) || body.starts(with: [0xFE, 0xFF]),
              let type = contentType?.lowercased(), type.contains("json") else { return nil }
        return "a JSON document in UTF-16 (it starts with a UTF-16 byte order mark, Content-Type \(contentType!.cut(toBytes: 100))): "
            + "JSON between systems is UTF-8 (RFC 8259, 8.1), which is what cached reads"
    }

    /// What a body that fails as JSON is, when it was never JSON (nothing,
    /// or text that does not begin as JSON does): its Content-Type and its
    /// first bytes, rather than the parser's "invalid JSON at byte 0". Nil
    /// for a body that begins as JSON (the parser's error says where it broke).
    static func notAFeed(_ body: [UInt8], contentType: String?) -> String? {
        let type = contentType.map { "Content-Type \($0.cut(toBytes: 100))" } ?? "no Content-Type"
        let start = Self.start(of: body)
        guard let first = start.first else {
            return "an empty document (\(type)), not JSON, RSS or Atom"
        }
        let jsonStart: Set<UInt8> = Set("[{\"-0123456789tfn".utf8)
        guard !jsonStart.contains(first) else { return nil }
        let shown = String(decoding: start.prefix(80), as: UTF8.self).map { $0.isLetter || $0.isNumber || $0.isPunctuation || $0 == " " ? $0 : " " }
        var begins = String(shown)
        while begins.last == " " { begins.removeLast() }
        begins = begins.cut(toBytes: 80)
        return "the document is not JSON, RSS or Atom (\(type)); it begins \"\(begins)\""
    }

    static func start(of body: [UInt8]) -> ArraySlice<UInt8> {
        let rest = body.starts(with: [0xEF, 0xBB, 0xBF]) ? body.dropFirst(3) : body[...]
        return rest.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
    }

    /// True for the charsets a feed is read in (any case): the Unicode
    /// ones but UTF-7 (whose `+ADw-` would be a `<` the document never
    /// showed), ASCII, the ISO-8859 and Windows code pages, KOI8 and the
    /// CJK encodings. Another `charset` fails the page, saying so.
    static func isFeedCharset(_ name: String) -> Bool {
        let n = name.lowercased()
        if ["utf-8", "utf8", "utf-16", "utf-16le", "utf-16be", "us-ascii", "ascii", "latin1", "koi8-r", "koi8-u", "shift_jis", "sjis",
            "euc-jp", "iso-2022-jp", "euc-kr", "gb2312", "gbk", "gb18030", "big5"].contains(n) { return true }
        for prefix in ["iso-8859-", "iso8859-", "windows-125", "cp125"] where n.hasPrefix(prefix) {
            let rest = n.dropFirst(prefix.count)
            return !rest.isEmpty && rest.count <= 2 && rest.allSatisfy(\.isNumber)
        }
        return false
    }

    /// The media type of a `Content-Type` value, lowercased, without parameters.
    static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map(String.init) ?? contentType
        return type.trimmed().lowercased()
    }

    /// The `charset` parameter of a `Content-Type` value, unquoted; nil when absent.
    static func charset(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { String($0).trimmed() }
            guard pair.count == 2, pair[0].lowercased() == "charset" else { continue }
            let value = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2 ? String(pair[1].dropFirst().dropLast()) : pair[1]
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// Why an answer is refused as HTML, or nil: a body that begins as an
    /// HTML document does (`<!DOCTYPE html`, `<html`), or markup served as
    /// `text/html` that is no mislabeled feed (`isMislabeledFeed`). JSON is
    /// read whatever its `Content-Type` says.
    static func htmlRefusal(_ body: [UInt8], contentType: String?) -> String? {
        let start = start(of: body)
        guard start.first == UInt8(ascii: "<") else { return nil }
        let head = String(decoding: start.prefix(64), as: UTF8.self).lowercased()
        let type = mediaType(contentType)
        guard head.hasPrefix("<!doctype html") || head.hasPrefix("<html") || (type == "text/html" && !isMislabeledFeed(start)) else { return nil }
        return "the answer is an HTML page (Content-Type: \(type ?? "none")), not a feed (JSON, RSS or Atom): "
            + "the URL may be a site's page rather than its API or feed, or the API answers HTML unless asked for JSON "
            + "(set fetch-header = \"Accept: application/json\")"
    }

    /// WHATWG MIME Sniffing, 7.3 ("Sniffing a mislabeled feed"), as browsers
    /// and feed readers read a feed a server sends as `text/html`: after
    /// comments (`<!-- -->`), declarations (`<!DOCTYPE ...>`) and processing
    /// instructions (`<?xml ...?>`), within the first 512 bytes, the first
    /// element is `<rss`, `<feed` or `<rdf:RDF`. `start`: the body from its
    /// first byte that is not a byte order mark or white space.
    static func isMislabeledFeed(_ start: ArraySlice<UInt8>) -> Bool {
        let head = Array(start.prefix(512))
        var i = 0
        func at(_ s: String) -> Bool { head[i...].starts(with: Array(s.utf8)) }
        func skip(past end: String) -> Bool {
            let e = Array(end.utf8)
            guard let found = (i..<head.count).first(where: { head[$0...].starts(with: e) }) else { return false }
            i = found + e.count
            return true
        }
        while i < head.count {
            if [0x20, 0x09, 0x0A, 0x0D].contains(head[i]) { i += 1; continue }
            guard head[i] == UInt8(ascii: "<") else { return false }
            if at("<!--") { guard skip(past: "-->") else { return false }; continue }
            if at("<!") || at("<?") { guard skip(past: ">") else { return false }; continue }
            return at("<rss") || at("<feed") || at("<rdf:RDF")
        }
        return false
    }
}
