import CacheHTTP
import CacheProtocol
import CacheSystem

/// RSS 2.0, RSS 1.0 and Atom 1.0 elements to JSON Feed 1.1 items, from the
/// reader's events (docs/protocol.md, "RSS and Atom"). Namespaces are
/// matched by URI, never by prefix; only one entry and one text field are
/// held at a time.
struct XMLFeedMapping: XMLEventSink {
    enum Namespace {
        static let atom = "http://www.w3.org/2005/Atom"
        static let rss1 = "http://purl.org/rss/1.0/"
        /// RSS 0.90 (Netscape, 1999): `rdf:RDF` as RSS 1.0, its elements in this namespace.
        static let rss090 = "http://my.netscape.com/rdf/simple/0.9/"
        static let userlandRSS2 = "http://backend.userland.com/rss2"
        static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
        static let content = "http://purl.org/rss/1.0/modules/content/"
        static let dc = "http://purl.org/dc/elements/1.1/"
        static let media = "http://search.yahoo.com/mrss/"
        static let itunes = "http://www.itunes.com/dtds/podcast-1.0.dtd"
        static let xml = "http://www.w3.org/XML/1998/namespace"
    }
    static let htmlRefusal = "an HTML document (its root is <html>), not an RSS or Atom feed"

    /// The text fields gathered from an element's content.
    private enum Field {
        case title, link, guid, description, contentEncoded, pubDate, dcDate, published, updated
        case author, category, atomID, contentHTML, contentText, summary, authorName, authorURI
    }

    /// The element whose text is being gathered. `markup`: XHTML content,
    /// written out as HTML (its wrapping xhtml `div` left out). `plain`: a
    /// JSON Feed plain-text member (a title, a summary) from an Atom text
    /// construct of type `html` (its HTML made text, `HTMLText`) or `xhtml`
    /// (its text alone), white space collapsed.
    private struct Capture {
        var field: Field
        var depth: Int
        var markup: Bool
        var plain: Plain = .no
        /// What a URL in the text resolves against.
        var base: String?
        var text = ""
    }

    private var format: XMLFeedPage.Format?
    /// The namespace of the format's own item elements ("" for RSS 2.0).
    private var core = ""
    private var items: [JSON] = []
    /// Elements where an entry goes, named as one (`item`, `entry`), in
    /// another namespace than the format's: how many, and the first one's.
    private var unrecognized = (count: 0, namespace: "")
    private var next: String?
    private var channelImage: String?
    /// Items made before the channel's image was seen, which had none of their own.
    private var imageless: [Int] = []
    private var entry: XMLFeedEntry?
    private var entryDepth = 0
    private var capture: Capture?
    /// An Atom `author` being read.
    private var author: (name: String?, url: String?)?
    private var stack: [XMLName] = []
    /// The document's URL, and each open element's base URL (`xml:base`,
    /// resolved against its parent's, else the document's URL).
    private let documentURL: String?
    private var bases: [String?] = []

    /// `documentURL`: what the document's relative URLs resolve against
    /// (nil: they are kept as written).
    init(documentURL: String? = nil) {
        self.documentURL = documentURL
    }

    /// The base URL of the element being read.
    private var base: String? { bases.isEmpty ? documentURL : bases[bases.count - 1] }

    /// `url` resolved against `base` (RFC 3986, as a browser does) when it
    /// is relative; an absolute URL, or one that does not resolve to an
    /// http or https URL (a base of another scheme), is kept as written.
    private func absolute(_ url: String, against base: String?) -> String {
        guard let base, URIReference.parse(url).scheme == nil, let resolved = FeedDecoder.resolve(url, base: base),
              let scheme = URIReference.parse(resolved).scheme, URLScheme.isHTTP(scheme: scheme) else { return url }
        return resolved
    }

    /// The page once the whole document was read.
    func page() throws(FeedError) -> XMLFeedPage {
        guard let format else { throw FeedError("an XML document without a root element, not RSS or Atom") }
        // Stored, a page of entries none of which was read would remove
        // every post the feed had, and say nothing.
        if unrecognized.count > 0 {
            let local = format == .atom ? "entry" : "item"
            let namespace = unrecognized.namespace.isEmpty ? "no namespace" : "namespace \(unrecognized.namespace.cut(toBytes: 200))"
            throw FeedError("\(unrecognized.count) <\(local)> element\(unrecognized.count == 1 ? " is" : "s are") in \(namespace), not "
                + "\(format.rawValue)'s (\(core.isEmpty ? "no namespace" : core)): not read as posts, so nothing was stored")
        }
        var items = items
        if let channelImage {
            for i in imageless { items[i] = XMLFeedEntry.adding(image: channelImage, to: items[i]) }
        }
        return XMLFeedPage(format: format, items: items, next: next)
    }

    mutating func start(_ name: XMLName, attributes: [XMLAttribute], depth: Int) throws(FeedError) {
        let parent = stack.last
        stack.append(name)
        let inherited = base
        let own = attributes.first { $0.namespace == Namespace.xml && $0.local == "base" }?.value.trimmingXMLSpace().nonEmpty
        // An xml:base that is no http(s) URL once resolved is ignored.
        let ownBase = own.map { absolute($0, against: inherited) }.flatMap { b in
            URIReference.parse(b).scheme.map { URLScheme.isHTTP(scheme: $0) } == true ? b : nil
        }
        bases.append(ownBase ?? inherited)
        if var capture {
            if capture.markup, !isWrappingDiv(name, depth: depth, in: capture) {
                capture.text += XMLMarkup.startTag(name, attributes: attributes)
                self.capture = capture
            }
            return
        }
        let attribute = { (local: String) -> String? in
            attributes.first { $0.namespace.isEmpty && $0.local == local }?.value.trimmingXMLSpace().nonEmpty
        }
        let here = base
        let url = { [self] (local: String) -> String? in attribute(local).map { absolute($0, against: here) } }
        if depth == 0 {
            try root(name)
        } else if entry != nil {
            entryStart(name, attribute: attribute, url: url, depth: depth, parent: parent)
        } else if isEntry(name, depth: depth, parent: parent) || isRSS090(name, depth: depth) {
            var started = XMLFeedEntry()
            if format == .rss1 {
                started.about = attributes.first { $0.namespace == Namespace.rdf && $0.local == "about" }?.value.trimmingXMLSpace().nonEmpty
            }
            entry = started
            entryDepth = depth
        } else if isMisplacedEntry(name, depth: depth, parent: parent) {
            unrecognized.count += 1
            if unrecognized.count == 1 { unrecognized.namespace = name.namespace }
        } else if format == .atom ? depth == 1 : depth == 2 && parent?.local == "channel" {
            // The channel's own elements: the next page, the podcast's image.
            if name == XMLName(namespace: Namespace.atom, local: "link"), relation(attribute("rel")) == "next", next == nil {
                next = url("href")
            } else if name == XMLName(namespace: Namespace.itunes, local: "image"), channelImage == nil {
                channelImage = url("href")
            }
        }
    }

    mutating func text(_ text: String) {
        guard var capture else { return }
        capture.text += capture.markup ? XMLMarkup.escape(text) : text
        self.capture = capture
    }

    mutating func end(_ name: XMLName, depth: Int) {
        stack.removeLast()
        bases.removeLast()
        if var capture {
            if depth == capture.depth {
                finish(capture)
                self.capture = nil
            } else if capture.markup, !isWrappingDiv(name, depth: depth, in: capture) {
                capture.text += XMLMarkup.endTag(name)
                self.capture = capture
            }
            return
        }
        guard let entry else { return }
        if depth == entryDepth, let format {
            let image = entry.image
            if image == nil, channelImage == nil { imageless.append(items.count) }
            items.append(entry.item(format: format, image: image ?? channelImage))
            self.entry = nil
        } else if depth == entryDepth + 1, name == XMLName(namespace: Namespace.atom, local: "author"), let author {
            if author.name != nil || author.url != nil { self.entry?.authors.append(author) }
            self.author = nil
        }
    }

    private mutating func root(_ name: XMLName) throws(FeedError) {
        switch (name.namespace, name.local) {
        case ("", "rss"): format = .rss2
        // RSS 2.0 in the namespace UserLand's tools once gave it (Radio UserLand, some old blogs).
        case (Namespace.userlandRSS2, "rss"): format = .rss2; core = Namespace.userlandRSS2
        case (Namespace.rdf, "RDF"): format = .rss1; core = Namespace.rss1
        case (Namespace.atom, "feed"): format = .atom; core = Namespace.atom
        case (_, let local) where local.lowercased() == "html": throw FeedError(Self.htmlRefusal)
        default:
            let namespace = name.namespace.isEmpty ? "" : " (namespace \(name.namespace))"
            throw FeedError("an XML document whose root is <\(name.local)>\(namespace), not RSS or Atom")
        }
    }

    private func isEntry(_ name: XMLName, depth: Int, parent: XMLName?) -> Bool {
        switch format {
        case .rss2: return name == XMLName(namespace: core, local: "item") && depth == 2 && parent == XMLName(namespace: core, local: "channel")
        case .rss1: return name == XMLName(namespace: core, local: "item") && depth == 1
        case .atom: return name == XMLName(namespace: core, local: "entry") && depth == 1
        case nil: return false
        }
    }

    /// RSS 0.90's first `item`: the RDF family read in its namespace from
    /// here on (its `title`, `link` and `description` are in it too).
    private mutating func isRSS090(_ name: XMLName, depth: Int) -> Bool {
        guard format == .rss1, depth == 1, name == XMLName(namespace: Namespace.rss090, local: "item"), items.isEmpty else { return false }
        core = Namespace.rss090
        return true
    }

    /// Named as the format's entry and where one goes, but in another namespace.
    private func isMisplacedEntry(_ name: XMLName, depth: Int, parent: XMLName?) -> Bool {
        switch format {
        case .rss2: return name.local == "item" && depth == 2 && parent?.local == "channel"
        case .rss1: return name.local == "item" && depth == 1
        case .atom: return name.local == "entry" && depth == 1
        case nil: return false
        }
    }

    /// An element inside an item or entry: which field or attributes it gives.
    /// `url` reads an attribute as a URL, resolved against the element's base.
    private mutating func entryStart(_ name: XMLName, attribute: (String) -> String?, url: (String) -> String?,
                                     depth: Int, parent: XMLName?) {
        let level = depth - entryDepth
        if name.namespace == Namespace.media {  // Media RSS, also inside media:group or media:content
            if name.local == "content", let url = url("url") {
                let (medium, type) = (attribute("medium"), attribute("type"))
                entry?.mediaContents.append(.init(url: url, type: type, length: attribute("fileSize")))
                if medium == "image" || type.map(isImageType) == true {
                    entry?.mediaImages.append(url)
                } else if medium == nil, type == nil, !XMLFeedEntry.namesNoImage(url) {
                    // Both are optional (Media RSS 1.5.1): the Guardian's are images with neither.
                    entry?.untypedMedia.append(url)
                }
            } else if name.local == "thumbnail", let url = url("url") {
                entry?.thumbnails.append(url)
            }
            return
        }
        if level == 2, author != nil, parent == XMLName(namespace: Namespace.atom, local: "author") {
            switch name.local {
            case "name" where name.namespace == Namespace.atom: begin(.authorName, depth)
            case "uri" where name.namespace == Namespace.atom: begin(.authorURI, depth)
            default: break
            }
            return
        }
        guard level == 1 else { return }
        switch (name.namespace, name.local) {
        case (Namespace.content, "encoded"): begin(.contentEncoded, depth)
        case (Namespace.dc, "creator"): begin(.author, depth)
        case (Namespace.dc, "date"): begin(.dcDate, depth)
        case (Namespace.itunes, "image"): if entry?.itunesImage == nil { entry?.itunesImage = url("href") }
        case (core, _) where format == .atom: atomStart(name.local, attribute: attribute, url: url, depth: depth)
        case (core, "title"): begin(.title, depth)
        case (core, "link"): begin(.link, depth)
        case (core, "description"): begin(.description, depth)
        case (core, "guid") where format == .rss2:
            entry?.guidIsPermaLink = attribute("isPermaLink")?.lowercased() != "false"
            begin(.guid, depth)
        case (core, "pubDate") where format == .rss2: begin(.pubDate, depth)
        case (core, "author") where format == .rss2: begin(.author, depth)
        case (core, "category") where format == .rss2: begin(.category, depth)
        case (core, "enclosure") where format == .rss2:
            if let url = url("url") {
                entry?.enclosures.append(.init(url: url, type: attribute("type"), length: attribute("length")))
            }
        default: break
        }
    }

    private mutating func atomStart(_ local: String, attribute: (String) -> String?, url: (String) -> String?, depth: Int) {
        let type = attribute("type")?.lowercased()
        switch local {
        case "id": begin(.atomID, depth)
        case "title": begin(.title, depth, plain: Self.plain(ofType: type))
        case "summary": begin(.summary, depth, plain: Self.plain(ofType: type))
        case "published": begin(.published, depth)
        case "updated": begin(.updated, depth)
        case "author": author = (nil, nil)
        case "category": if let term = attribute("term") { entry?.tags.append(term) }
        case "content":
            guard attribute("src") == nil else { return }  // out-of-line content: nothing to copy
            switch type ?? "text" {
            case "text", "text/plain": begin(.contentText, depth)
            case "html", "text/html": begin(.contentHTML, depth)
            case "xhtml", "application/xhtml+xml": begin(.contentHTML, depth, markup: true)
            case let other where other.hasPrefix("text/"): begin(.contentText, depth)
            default: break
            }
        case "link":
            guard let href = attribute("href"), let resolved = url("href") else { return }
            switch relation(attribute("rel")) {
            case "alternate":
                // As written for the id (a store's ids never move), resolved for the URL.
                if entry?.alternate == nil { entry?.alternate = href; entry?.alternateURL = resolved }
            case "enclosure": entry?.enclosures.append(.init(url: resolved, type: attribute("type"), length: attribute("length")))
            default: break
            }
        default: break
        }
    }

    /// An Atom link relation: none is "alternate"; IANA's full IRIs are their short names.
    private func relation(_ rel: String?) -> String {
        guard let rel else { return "alternate" }
        let iana = "http://www.iana.org/assignments/relation/"
        return rel.hasPrefix(iana) ? String(rel.dropFirst(iana.count)) : rel
    }

    private func isWrappingDiv(_ name: XMLName, depth: Int, in capture: Capture) -> Bool {
        depth == capture.depth + 1 && name == XMLName(namespace: XMLMarkup.xhtml, local: "div")
    }

    private enum Plain { case no, fromHTML, fromText }

    private mutating func begin(_ field: Field, _ depth: Int, markup: Bool = false, plain: Plain = .no) {
        capture = Capture(field: field, depth: depth, markup: markup, plain: plain, base: base)
    }

    /// How an Atom text construct of `type` becomes a plain-text member (RFC 4287, 3.1).
    private static func plain(ofType type: String?) -> Plain {
        switch type ?? "text" {
        case "html", "text/html": return .fromHTML
        case "xhtml", "application/xhtml+xml": return .fromText
        default: return .no
        }
    }

    /// A gathered text: surrounding whitespace dropped, an empty one is no value.
    /// The first of a repeated single field wins.
    private mutating func finish(_ capture: Capture) {
        let gathered: String
        switch capture.plain {
        case .no: gathered = capture.text
        case .fromHTML: gathered = HTMLText.plain(capture.text)
        case .fromText: gathered = HTMLText.collapsed(capture.text)
        }
        guard let text = gathered.trimmingXMLSpace().nonEmpty else { return }
        func set(_ field: WritableKeyPath<XMLFeedEntry, String?>) {
            if entry?[keyPath: field] == nil { entry?[keyPath: field] = text }
        }
        switch capture.field {
        case .title: set(\.title)
        case .link:
            // As written for the id, resolved for the URL.
            let resolved = absolute(text, against: capture.base)
            if entry?.link == nil { entry?.linkURL = resolved }
            set(\.link)
        case .guid:
            // A permalink is a URL: a guid that is not an absolute one is no item URL.
            if entry?.guid == nil, let scheme = URIReference.parse(text).scheme, URLScheme.isHTTP(scheme: scheme) { entry?.guidURL = text }
            set(\.guid)
        case .description: set(\.description)
        case .contentEncoded: set(\.contentEncoded)
        case .pubDate: set(\.pubDate)
        case .dcDate: set(\.dcDate)
        case .published: set(\.published)
        case .updated: set(\.updated)
        case .atomID: set(\.atomID)
        case .contentHTML: set(\.contentHTML)
        case .contentText: set(\.contentText)
        case .summary: set(\.summary)
        case .author: entry?.authors.append((text, nil))
        case .category: entry?.tags.append(text)
        case .authorName: author?.name = text
        case .authorURI:
            let resolved = absolute(text, against: capture.base)
            author?.url = resolved
        }
    }
}

extension String {
    /// Without XML's white space (space, tab, CR, LF) at either end.
    func trimmingXMLSpace() -> String {
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }), let last = scalars.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(scalars[first...last])
    }

    var nonEmpty: String? { isEmpty ? nil : self }
}
