import CacheProtocol

/// One RSS item or Atom entry as read so far, and the JSON Feed 1.1 item
/// it becomes (docs/protocol.md, "RSS and Atom").
struct XMLFeedEntry {
    struct Enclosure {
        var url: String
        var type: String?
        var length: String?
    }

    /// RSS 1.0's `rdf:about`.
    var about: String?
    var guid: String?
    /// The guid when it is an absolute http(s) URL (a permalink).
    var guidURL: String?
    var guidIsPermaLink = true
    /// `link` as written (an id when there is no guid), and resolved (the item's URL).
    var link: String?
    var linkURL: String?
    var atomID: String?
    /// Atom's `link rel="alternate"` (or no rel), as written and resolved.
    var alternate: String?
    var alternateURL: String?
    var title: String?
    var contentEncoded: String?
    var description: String?
    var contentHTML: String?
    var contentText: String?
    var summary: String?
    var pubDate: String?
    var dcDate: String?
    var published: String?
    var updated: String?
    var authors: [(name: String?, url: String?)] = []
    var enclosures: [Enclosure] = []
    /// Every `media:content` (Media RSS), of any medium: attachments too.
    var mediaContents: [Enclosure] = []
    var mediaImages: [String] = []
    /// `media:content` that says neither its `medium` nor its `type`.
    var untypedMedia: [String] = []
    var thumbnails: [String] = []
    var itunesImage: String?
    var tags: [String] = []

    /// The item's image from the entry itself, by the mapping's order of preference.
    var image: String? {
        enclosures.first { $0.type.map(isImageType) ?? false }?.url ?? mediaImages.first ?? thumbnails.first ?? untypedMedia.first
            ?? itunesImage
    }

    /// The file name extensions of audio, video and documents: a
    /// `media:content` without `medium` or `type` whose URL's path ends so is
    /// no image candidate.
    static let noImageExtensions: Set<String> = ["mp3", "m4a", "aac", "ogg", "oga", "opus", "wav", "flac", "mp4", "m4v", "mov",
                                                 "webm", "mkv", "avi", "mpg", "mpeg", "m3u8", "mpd", "pdf", "zip", "txt", "html"]

    static func namesNoImage(_ url: String) -> Bool {
        let path = url.split(separator: "?", maxSplits: 1).first.map { $0.split(separator: "#", maxSplits: 1).first ?? $0 } ?? ""
        guard let name = path.split(separator: "/").last, let dot = name.lastIndex(of: ".") else { return false }
        return noImageExtensions.contains(name[name.index(after: dot)...].lowercased())
    }

    /// The item object; `image` is the entry's own or the channel's.
    func item(format: XMLFeedPage.Format, image: String?) -> JSON {
        var members: [(String, JSON)] = []
        func add(_ key: String, _ value: String?) {
            if let value { members.append((key, .string(value))) }
        }
        switch format {
        case .rss2:
            add("id", guid ?? link)
            add("url", linkURL ?? (guidIsPermaLink ? guidURL : nil))
        case .rss1:
            add("id", about ?? link)
            add("url", linkURL)
        case .atom:
            add("id", atomID ?? alternate)
            add("url", alternateURL)
        }
        add("title", title)
        if format == .atom {
            add("content_html", contentHTML)
            add("content_text", contentText)
            add("summary", summary)
        } else if let contentEncoded {
            add("content_html", contentEncoded)
            // JSON Feed's summary is plain text; RSS's description is HTML.
            add("summary", description.map(HTMLText.plain).flatMap(\.nonEmpty))
        } else {
            add("content_html", description)
        }
        add("date_published", pubDate.flatMap(FeedDates.rfc822) ?? dcDate.flatMap(FeedDates.w3cdtf) ?? published.flatMap(FeedDates.w3cdtf))
        add("date_modified", updated.flatMap(FeedDates.w3cdtf))
        if !authors.isEmpty {
            members.append(("authors", .array(authors.map { author in
                var fields: [(String, JSON)] = []
                if let name = author.name { fields.append(("name", .string(name))) }
                if let url = author.url { fields.append(("url", .string(url))) }
                return .object(fields)
            })))
        }
        add("image", image)
        // The enclosures, then the Media RSS objects they do not name: a
        // toot's second image and its video were stored nowhere.
        let attachments = enclosures + mediaContents.filter { m in !enclosures.contains { $0.url == m.url } }
        if !attachments.isEmpty {
            members.append(("attachments", .array(attachments.map { enclosure in
                var fields: [(String, JSON)] = [("url", .string(enclosure.url))]
                if let type = enclosure.type { fields.append(("mime_type", .string(type))) }
                if let size = enclosure.length.flatMap(Self.size) { fields.append(("size_in_bytes", .number(String(size)))) }
                return .object(fields)
            })))
        }
        if !tags.isEmpty { members.append(("tags", .array(tags.map { .string($0) }))) }
        return .object(members)
    }

    /// An enclosure's length when it is a valid non-negative integer.
    private static func size(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }

    /// An item made without an image, given the channel's one (which can
    /// come after the items): `image` goes before attachments and tags.
    static func adding(image: String, to item: JSON) -> JSON {
        guard case .object(var members) = item else { return item }
        let at = members.firstIndex { $0.0 == "attachments" || $0.0 == "tags" } ?? members.count
        members.insert(("image", .string(image)), at: at)
        return .object(members)
    }
}

func isImageType(_ type: String) -> Bool {
    type.lowercased().hasPrefix("image/")
}

/// XHTML content written out as HTML text: the inner markup of an Atom
/// `type="xhtml"` construct, from the reader's events.
enum XMLMarkup {
    static let xhtml = "http://www.w3.org/1999/xhtml"
    /// HTML's void elements, written without an end tag.
    static let voidElements: Set<String> = ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                                            "param", "source", "track", "wbr"]

    static func startTag(_ name: XMLName, attributes: [XMLAttribute]) -> String {
        var tag = "<" + name.local
        for attribute in attributes {
            let prefix = attribute.namespace == "http://www.w3.org/XML/1998/namespace" ? "xml:" : ""
            tag += " \(prefix)\(attribute.local)=\"\(escape(attribute.value, quote: true))\""
        }
        return tag + ">"
    }

    static func endTag(_ name: XMLName) -> String {
        voidElements.contains(name.local) ? "" : "</\(name.local)>"
    }

    static func escape(_ text: String, quote: Bool = false) -> String {
        guard text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || (quote && $0 == 0x22) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where quote: out += "&quot;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
