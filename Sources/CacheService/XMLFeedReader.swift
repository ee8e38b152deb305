import CacheProtocol
import CXML2
import CacheSystem
import Synchronization

/// An RSS or Atom document read as JSON Feed 1.1 items (docs/protocol.md, "RSS and Atom").
public struct XMLFeedPage: Sendable {
    /// The three formats read, by their root element.
    public enum Format: String, Sendable { case rss2 = "RSS 2.0", rss1 = "RSS 1.0", atom = "Atom 1.0" }
    public var format: Format
    /// Each entry as a JSON Feed 1.1 item object, in document order.
    public var items: [JSON]
    /// The href of the feed's `<link rel="next">` (Atom; `atom:link rel="next"` inside an RSS channel, RFC 5005), unresolved; nil if none.
    public var next: String?
}

/// RSS 2.0, RSS 1.0 and Atom 1.0 through libxml2's streaming reader: one
/// pass over the body, no tree kept, and none of XML's ways out of the
/// document (no DTD loaded, no entity declared or referenced, no network).
public enum XMLFeedReader {
    /// True when the body's first non-whitespace bytes (after an optional UTF-8 BOM) are `<`.
    public static func looksLikeXML(_ body: [UInt8]) -> Bool {
        // A UTF-16 byte order mark: JSON is never sent so, XML may be.
        if body.starts(with: [0xFF, 0xFE]) || body.starts(with: [0xFE, 0xFF]) { return true }
        return FeedContent.start(of: body).first == UInt8(ascii: "<")
    }

    /// Reads one page. `charset` is the HTTP Content-Type's charset parameter if any (RFC 7303: it wins over the XML declaration).
    /// `url`, the document's URL, is what its relative URLs resolve against (after any `xml:base`).
    public static func read(_ body: [UInt8], charset: String?, url: String? = nil) throws(FeedError) -> XMLFeedPage {
        var mapping = XMLFeedMapping(documentURL: url)
        try XMLStream.walk(body, charset: charset, into: &mapping)
        return try mapping.page()
    }
}

/// An element's name: its namespace URI ("" for none) and local name.
struct XMLName: Equatable {
    var namespace: String
    var local: String
}

/// One attribute of an element (namespace declarations left out).
struct XMLAttribute {
    var namespace: String
    var local: String
    var value: String
}

/// What the walk hands on, in document order. An empty element is a start
/// and an end; `depth` is 0 for the root.
protocol XMLEventSink {
    mutating func start(_ name: XMLName, attributes: [XMLAttribute], depth: Int) throws(FeedError)
    mutating func text(_ text: String)
    mutating func end(_ name: XMLName, depth: Int)
}

/// The walk over libxml2's xmlTextReader.
enum XMLStream {
    /// Deeper than this is refused before libxml2's own limit (256) is reached.
    static let maxDepth = 64
    static let entitiesRefused = "entity declarations are refused (a feed never needs them)"
    static let attributeListsRefused = "attribute-list declarations are refused (a feed never needs them; libxml2 would copy their defaults into every element)"
    /// libxml2's bound on one text node, attribute value, name or look-ahead (without `XML_PARSE_HUGE`).
    static let libxml2Limit = 10_000_000
    /// How many times libxml2 asked for an external entity or DTD (always
    /// refused; the tests check that it is never even asked).
    static let externalLoads = Atomic<Int>(0)

    /// Once per process: libxml2's global set-up, and an external entity
    /// loader that loads nothing, behind the options that already load nothing.
    private static let setUp: Void = {
        xmlInitParser()
        xmlSetExternalEntityLoader { _, _, _ in
            XMLStream.externalLoads.add(1, ordering: .relaxed)
            return nil
        }
    }()

    static func walk<Sink: XMLEventSink>(_ body: [UInt8], charset: String?, into sink: inout Sink) throws(FeedError) {
        _ = setUp
        guard !body.isEmpty else { throw FeedError("an empty document, not RSS or Atom") }
        guard body.count <= Int(Int32.max) else { throw FeedError("an XML document of \(body.count) bytes, more than libxml2 reads") }
        // NONET and no DTD, entity, XInclude or recovery option: nothing is
        // loaded and nothing is substituted. NOCDATA: CDATA arrives as text.
        var options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOCDATA.rawValue)
        if let charset {
            guard FeedContent.isFeedCharset(charset) else {
                throw FeedError("the Content-Type's charset \(charset.cut(toBytes: 100)) is not one a feed is read in (UTF-8, UTF-16, "
                                + "US-ASCII, ISO-8859-n, windows-125n, KOI8, Shift_JIS, EUC-JP, ISO-2022-JP, EUC-KR, GB2312, GBK, GB18030, Big5)")
            }
            guard let handler = xmlFindCharEncodingHandler(charset) else {
                throw FeedError("the Content-Type's charset \(charset.cut(toBytes: 100)) is not an encoding libxml2 knows")
            }
            xmlCharEncCloseFunc(handler)
            options |= Int32(XML_PARSE_IGNORE_ENC.rawValue)  // RFC 7303: the charset wins over the declaration.
        }
        // ISO-8859-1 and US-ASCII, from either side, are windows-1252, which
        // is decoded here as it is read, as WHATWG's table says
        // (`Windows1252Input`): libxml2 reads UTF-8 and leaves the declaration aside.
        let recoded = XMLEncoding.readsAsWindows1252(charset: charset, body: body) ? Windows1252Input(body) : nil
        if recoded != nil { options |= Int32(XML_PARSE_IGNORE_ENC.rawValue) }
        // Whatever libxml2 reports outside the reader on this thread goes nowhere (not stderr).
        xmlSetStructuredErrorFunc(nil) { _, _ in }
        // libxml2's own limits stay: `XML_PARSE_HUGE` would lift its 10 MB
        // bound on one text node, but 2.9's push parser (which the reader
        // feeds 512 bytes at a time) rescans what is pending at each chunk:
        // an 11 MB CDATA section took 19 s and a 22 MB one over 120 s.
        try run(body, charset: charset, options: options, recoded: recoded, into: &sink)
    }

    /// libxml2's reader over `body` with `options`, its events into `sink`.
    private static func run<Sink: XMLEventSink>(_ body: [UInt8], charset: String?, options: Int32, recoded: Windows1252Input?,
                                                into sink: inout Sink) throws(FeedError) {
        let errors = ParseErrors()
        let result: Result<Void, FeedError> = body.withUnsafeBufferPointer { buffer in
            let made: xmlTextReaderPtr?
            if let recoded {
                made = xmlReaderForIO({ context, out, count in
                    guard let context, let out, count > 0 else { return 0 }
                    return Int32(Unmanaged<Windows1252Input>.fromOpaque(context).takeUnretainedValue().read(into: out, count: Int(count)))
                }, nil, Unmanaged.passUnretained(recoded).toOpaque(), nil, "UTF-8", options)
            } else {
                made = buffer.baseAddress.flatMap { base in
                    base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { xmlReaderForMemory($0, Int32(buffer.count), nil, charset, options) }
                }
            }
            guard let reader = made else { return .failure(FeedError("libxml2 could not start reading the document")) }
            var leftDocument: xmlDocPtr?
            defer {
                xmlFreeTextReader(reader)
                // The document a failed reader was asked for is no longer the reader's to free.
                if let leftDocument { xmlFreeDoc(leftDocument) }
            }
            xmlTextReaderSetStructuredErrorHandler(reader, { context, error in
                guard let context, let error else { return }
                Unmanaged<ParseErrors>.fromOpaque(context).takeUnretainedValue().note(error.pointee)
            }, Unmanaged.passUnretained(errors).toOpaque())
            do throws(FeedError) {
                try read(reader, body: buffer, into: &sink, errors: errors, failedDocument: &leftDocument)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        withExtendedLifetime(recoded) {}  // read through until here
        do throws(FeedError) { try result.get() } catch {
            throw overriding(error, charset: charset, declared: XMLEncoding.declared(in: body))
        }
    }

    /// `error`, saying also that the HTTP charset was read instead of the
    /// document's declaration when the two differ: libxml2's "Input is not
    /// proper UTF-8, indicate encoding !" does not say that the document
    /// did indicate one.
    static func overriding(_ error: FeedError, charset: String?, declared: String?) -> FeedError {
        guard let charset, let declared else { return error }
        let family = { (label: String) in XMLEncoding.windows1252Labels.contains(label.lowercased()) ? "windows-1252" : label.lowercased() }
        guard family(charset) != family(declared) else { return error }
        return FeedError(error.description + " (read as the Content-Type's charset \(charset.cut(toBytes: 100)), which wins over the "
                         + "document's declared encoding=\"\(declared.cut(toBytes: 100))\" (RFC 7303): the server's charset may be wrong)")
    }

    private static func read<Sink: XMLEventSink>(_ reader: xmlTextReaderPtr, body: UnsafeBufferPointer<UInt8>, into sink: inout Sink,
                                                 errors: ParseErrors, failedDocument: inout xmlDocPtr?) throws(FeedError) {
        var sawRoot = false
        var looks = StopLooks()
        while true {
            let status = xmlTextReaderRead(reader)
            if status == 0 { return }
            if status < 0 {
                failedDocument = xmlTextReaderCurrentDoc(reader)
                throw failure(errors, document: failedDocument, sawRoot: sawRoot, body: body)
            }
            switch UInt32(bitPattern: xmlTextReaderNodeType(reader)) {
            case XML_READER_TYPE_ELEMENT.rawValue:
                try looks.step(bytes: 0)
                let depth = Int(xmlTextReaderDepth(reader))
                guard depth < maxDepth else { throw FeedError("nested deeper than \(maxDepth) elements") }
                sawRoot = true
                let name = currentName(reader)
                let isEmpty = xmlTextReaderIsEmptyElement(reader) == 1
                try sink.start(name, attributes: attributes(reader), depth: depth)
                if isEmpty { sink.end(name, depth: depth) }
            case XML_READER_TYPE_END_ELEMENT.rawValue:
                sink.end(currentName(reader), depth: Int(xmlTextReaderDepth(reader)))
            case XML_READER_TYPE_TEXT.rawValue, XML_READER_TYPE_CDATA.rawValue,
                 XML_READER_TYPE_WHITESPACE.rawValue, XML_READER_TYPE_SIGNIFICANT_WHITESPACE.rawValue:
                if let value = xmlTextReaderConstValue(reader) {
                    let text = String(cString: value)
                    try looks.step(bytes: text.utf8.count)
                    sink.text(text)
                }
            case XML_READER_TYPE_DOCUMENT_TYPE.rawValue:
                if cxml2_dtd_declares_entities(xmlTextReaderCurrentNode(reader)) != 0 { throw FeedError(entitiesRefused) }
                if cxml2_dtd_declares_attributes(xmlTextReaderCurrentNode(reader)) != 0 { throw FeedError(attributeListsRefused) }
            case XML_READER_TYPE_ENTITY_REFERENCE.rawValue, XML_READER_TYPE_ENTITY.rawValue:
                let name = xmlTextReaderConstName(reader).map { String(cString: $0) } ?? ""
                throw FeedError("the entity reference &\(name); is refused: entities are never read (a feed never needs them)")
            default:
                continue  // comments, processing instructions, the XML declaration
            }
        }
    }

    /// Why the reader stopped: an HTML page or declared entities first,
    /// then libxml2's own first error with its line.
    private static func failure(_ errors: ParseErrors, document: xmlDocPtr?, sawRoot: Bool, body: UnsafeBufferPointer<UInt8>) -> FeedError {
        if !sawRoot {
            let root = xmlDocGetRootElement(document)?.pointee.name ?? document?.pointee.intSubset?.pointee.name
            if root.map({ String(cString: $0).lowercased() == "html" }) ?? looksLikeHTML(body) {
                return FeedError(XMLFeedMapping.htmlRefusal)
            }
        }
        if cxml2_doc_declares_entities(document) != 0 { return FeedError(entitiesRefused) }
        if cxml2_doc_declares_attributes(document) != 0 { return FeedError(attributeListsRefused) }
        guard let error = errors.first else { return FeedError("the XML could not be read (libxml2 gave no reason)") }
        // libxml2's size limits ("Huge input lookup", "huge text node", "CData section too big", "AttValue length too long").
        let said = error.message.lowercased()
        if said.contains("huge") || said.contains("too big") || said.contains("too long") {
            return FeedError("the XML could not be read: line \(error.line): \(error.message): one text node, attribute value or piece of markup "
                             + "is longer than the \(NumberText.grouped(libxml2Limit)) bytes libxml2 reads (an entry with an image inlined as data:, say); "
                             + "the page is refused whole")
        }
        return FeedError("the XML is not well-formed: line \(error.line): \(error.message)")
    }

    /// HTML that is no XML, as WHATWG MIME Sniffing (section 7.1) tells it:
    /// after white space, `<!DOCTYPE HTML`, `<html`, `<head`... (any case)
    /// then a space or `>`. Only asked once libxml2 has failed.
    static func looksLikeHTML(_ body: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = body.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while i < body.count, body[i] == 0x20 || body[i] == 0x09 || body[i] == 0x0A || body[i] == 0x0C || body[i] == 0x0D { i += 1 }
        let signatures = ["<!doctype html", "<html", "<head", "<script", "<iframe", "<h1", "<div", "<font", "<table", "<a",
                          "<style", "<title", "<b", "<body", "<br", "<p"]
        return signatures.contains { signature in
            let end = i + signature.utf8.count
            guard end < body.count else { return false }
            let lowered = body[i..<end].map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
            return lowered.elementsEqual(signature.utf8) && (body[end] == 0x20 || body[end] == 0x3E || body[end] == 0x0A || body[end] == 0x09)
        }
    }

    private static func currentName(_ reader: xmlTextReaderPtr) -> XMLName {
        XMLName(namespace: xmlTextReaderConstNamespaceUri(reader).map { String(cString: $0) } ?? "",
                local: xmlTextReaderConstLocalName(reader).map { String(cString: $0) } ?? "")
    }

    private static func attributes(_ reader: xmlTextReaderPtr) -> [XMLAttribute] {
        guard xmlTextReaderHasAttributes(reader) == 1 else { return [] }
        var found: [XMLAttribute] = []
        var more = xmlTextReaderMoveToFirstAttribute(reader)
        while more == 1 {
            if xmlTextReaderIsNamespaceDecl(reader) != 1 {
                let name = currentName(reader)
                let value = xmlTextReaderConstValue(reader).map { String(cString: $0) } ?? ""
                found.append(XMLAttribute(namespace: name.namespace, local: name.local, value: value))
            }
            more = xmlTextReaderMoveToNextAttribute(reader)
        }
        xmlTextReaderMoveToElement(reader)
        return found
    }
}

/// The first fatal error libxml2 reported through the reader, else its
/// first error (warnings ignored).
private final class ParseErrors {
    private var fatal: (line: Int32, message: String)?
    private var other: (line: Int32, message: String)?
    var first: (line: Int32, message: String)? { fatal ?? other }

    func note(_ error: xmlError) {
        guard error.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
        let isFatal = error.level.rawValue >= XML_ERR_FATAL.rawValue
        guard isFatal ? fatal == nil : other == nil else { return }
        var message = error.message.map { String(cString: $0) } ?? "error \(error.code)"
        while message.last == "\n" || message.last == " " { message.removeLast() }
        // One line: libxml2 breaks some messages ("indicate encoding !\nBytes: 0xFF ...").
        message = message.split(separator: "\n").map { String($0).trimmed() }.joined(separator: " ")
        if isFatal { fatal = (error.line, message) } else { other = (error.line, message) }
    }
}
