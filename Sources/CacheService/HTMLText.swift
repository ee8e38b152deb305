import CXML2

/// The text a browser shows for a piece of HTML, on one line: what JSON
/// Feed's `title` and `summary` hold (plain text), made from an Atom
/// `type="html"` title or summary, or an RSS `description` used as the
/// summary. WordPress's Atom feed writes `<title type="html"><![CDATA[It&#8217;s
/// &#8220;Quoted&#8221;]]></title>`: stored as given, the title read
/// `It&#8217;s` and no search for "It’s" found it.
///
/// Parsed by libxml2's HTML parser (no network, no errors reported): its
/// text nodes in order, with the contents of `script`, `style` and
/// `template` left out, a space where a line or block ends, and white space
/// collapsed. Character references (named, decimal, hexadecimal) come out
/// as the characters they name.
enum HTMLText {
    static func plain(_ html: String) -> String {
        // No markup and no reference: only the white space to collapse.
        guard html.utf8.contains(where: { $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: "&") }) else { return collapsed(html) }
        let options = Int32(HTML_PARSE_NONET.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                            | HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NODEFDTD.rawValue)
        let bytes = Array(html.utf8)
        guard bytes.count <= Int(Int32.max) else { return collapsed(html) }
        let doc = bytes.withUnsafeBufferPointer { b in
            b.baseAddress!.withMemoryRebound(to: CChar.self, capacity: b.count) { htmlReadMemory($0, Int32(b.count), nil, "UTF-8", options) }
        }
        guard let doc else { return collapsed(html) }
        defer { xmlFreeDoc(doc) }
        var out = ""
        append(xmlDocGetRootElement(doc), depth: 0, to: &out)
        return collapsed(out)
    }

    /// Elements whose content a browser does not show as text.
    private static let hidden: Set<String> = ["script", "style", "template", "head", "title"]
    /// Elements that end a line or a block: a space between their text and the next.
    private static let breaking: Set<String> = ["br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6",
                                                "blockquote", "pre", "ul", "ol", "dl", "dt", "dd", "hr", "section", "article",
                                                "header", "footer", "figure", "figcaption", "table"]

    /// Text nested deeper than this is left out (libxml2 stops nesting at
    /// 256 itself; this bound keeps the recursion's own stack small).
    static let maxDepth = 256

    private static func append(_ node: xmlNodePtr?, depth: Int, to out: inout String) {
        guard depth < maxDepth else { return }
        var node = node
        while let n = node {
            switch n.pointee.type {
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if let content = n.pointee.content { out += String(cString: content) }
            case XML_ELEMENT_NODE:
                let name = n.pointee.name.map { String(cString: $0).lowercased() } ?? ""
                if !hidden.contains(name) {
                    if breaking.contains(name) { out += " " }
                    append(n.pointee.children, depth: depth + 1, to: &out)
                    if breaking.contains(name) { out += " " }
                }
            default: break
            }
            node = n.pointee.next
        }
    }

    /// Runs of white space (and the no-break space HTML's `&nbsp;` gives
    /// kept as it is) as one space, none at either end.
    static func collapsed(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            if scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar == "\u{0C}" {
                pendingSpace = !out.isEmpty
                continue
            }
            if pendingSpace { out.unicodeScalars.append(" "); pendingSpace = false }
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
