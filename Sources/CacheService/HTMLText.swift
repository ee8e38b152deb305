import CXML2

/// The text a browser shows for a piece of HTML, on one line: what JSON
/// Feed's `title` and `summary` hold (plain text), made from an Atom
/// `type="html"` title or summary, or an RSS `description` used as the
/// summary. WordPress's Atom feed writes `<title type="html"><![CDATA[It&#8217;s
/// &#8220;Quoted&#8221;]]></title>`: stored as given, the title read
/// `It&#8217;s` and no search for "It’s" found it.
///
/// Read by libxml2's HTML parser through SAX callbacks (no tree is built:
/// a hostile feed's summary of hundreds of megabytes costs its text, not a
/// document several times its size; no network, no errors reported, no
/// `<meta charset>` obeyed): its text in order, with the contents of
/// `script`, `style` and `template` left out, a space where a line or
/// block ends, and white space collapsed. Character references (named,
/// decimal, hexadecimal) come out as the characters they name.
enum HTMLText {
    static func plain(_ html: String) -> String {
        // No markup and no reference: only the white space to collapse.
        guard html.utf8.contains(where: { $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: "&") }) else { return collapsed(html) }
        let bytes = Array(html.utf8)
        guard bytes.count <= Int(Int32.max) else { return collapsed(html) }
        let sink = TextSink()
        let parsed = bytes.withUnsafeBufferPointer { b -> Bool in
            guard let ctxt = b.baseAddress!.withMemoryRebound(to: CChar.self, capacity: b.count, {
                htmlCreateMemoryParserCtxt($0, Int32(b.count))
            }) else { return false }
            defer { htmlFreeParserCtxt(ctxt) }
            _ = htmlCtxtUseOptions(ctxt, Int32(HTML_PARSE_NONET.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                                               | HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NODEFDTD.rawValue | HTML_PARSE_IGNORE_ENC.rawValue))
            _ = xmlSwitchEncoding(ctxt, XML_CHAR_ENCODING_UTF8)
            guard let sax = ctxt.pointee.sax else { return false }
            // Only these callbacks: nothing builds a tree.
            sax.pointee = xmlSAXHandler()
            sax.pointee.startElement = { ctx, name, _ in TextSink.from(ctx)?.start(name) }
            sax.pointee.endElement = { ctx, name in TextSink.from(ctx)?.end(name) }
            sax.pointee.characters = { ctx, text, count in TextSink.from(ctx)?.text(text, count) }
            sax.pointee.cdataBlock = { ctx, text, count in TextSink.from(ctx)?.text(text, count) }
            ctxt.pointee.userData = Unmanaged.passUnretained(sink).toOpaque()
            _ = htmlParseDocument(ctxt)
            return true
        }
        guard parsed else { return collapsed(html) }
        return collapsed(String(decoding: sink.out, as: UTF8.self))
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

/// What the SAX callbacks gather: the text outside hidden elements.
private final class TextSink {
    var out: [UInt8] = []
    /// How many hidden elements (`script`, `style`...) the parser is inside.
    private var hidden = 0

    /// Elements whose content a browser does not show as text.
    private static let hiddenElements: Set<String> = ["script", "style", "template", "head", "title"]
    /// Elements that end a line or a block: a space between their text and the next.
    private static let breaking: Set<String> = ["br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6",
                                                "blockquote", "pre", "ul", "ol", "dl", "dt", "dd", "hr", "section", "article",
                                                "header", "footer", "figure", "figcaption", "table"]

    static func from(_ ctx: UnsafeMutableRawPointer?) -> TextSink? {
        ctx.map { Unmanaged<TextSink>.fromOpaque($0).takeUnretainedValue() }
    }

    private static func name(_ name: UnsafePointer<xmlChar>?) -> String {
        name.map { String(cString: $0).lowercased() } ?? ""
    }

    func start(_ element: UnsafePointer<xmlChar>?) {
        let n = Self.name(element)
        if Self.hiddenElements.contains(n) { hidden += 1 }
        if Self.breaking.contains(n) { out.append(0x20) }
    }

    func end(_ element: UnsafePointer<xmlChar>?) {
        let n = Self.name(element)
        if Self.hiddenElements.contains(n), hidden > 0 { hidden -= 1 }
        if Self.breaking.contains(n) { out.append(0x20) }
    }

    func text(_ text: UnsafePointer<xmlChar>?, _ count: Int32) {
        guard hidden == 0, let text, count > 0 else { return }
        out.append(contentsOf: UnsafeBufferPointer(start: text, count: Int(count)))
    }
}
