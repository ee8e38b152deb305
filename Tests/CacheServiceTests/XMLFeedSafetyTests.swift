import Testing
import Glibc
@testable import CacheService
import CacheProtocol
import CacheSystem
import Synchronization

private func read(_ bytes: [UInt8], charset: String? = nil) -> Result<XMLFeedPage, FeedError> {
    do throws(FeedError) { return .success(try XMLFeedReader.read(bytes, charset: charset)) } catch { return .failure(error) }
}

private func failure(_ xml: String) -> String {
    if case .failure(let error) = read(Array(xml.utf8)) { return error.description }
    return ""
}

/// XML's ways out of the document (entities, DTDs, depth), encodings, and
/// the memory a big page takes.
@Suite(.serialized) struct XMLFeedSafetyTests {
    static let refused = "entity declarations are refused (a feed never needs them)"

    @Test func billionLaughsIsRefused() {
        let xml = """
        <?xml version="1.0"?>
        <!DOCTYPE rss [
         <!ENTITY lol "lol">
         <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
         <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
         <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
         <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
         <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
         <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
         <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
         <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
         <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
        ]>
        <rss><channel><item><title>&lol9;</title></item></channel></rss>
        """
        let start = Clock.monotonicNanoseconds()
        #expect(failure(xml) == Self.refused)
        #expect(Clock.elapsed(since: start) < .milliseconds(2000))
        // The same with the reference past the reader's first chunks.
        let late = xml.replacing("<rss><channel>", with: "<rss><channel>" + String(repeating: "<item><guid>x</guid></item>\n", count: 400), maxReplacements: 1)
        #expect(failure(late) == Self.refused)
    }

    /// The same declarations with the reference in the root element's
    /// attribute, which libxml2 expands as it parses the start tag: refused
    /// in the prolog's pass, under libxml2's limits, before the document is
    /// read with them lifted (`XML_PARSE_HUGE`).
    @Test func billionLaughsInTheRootsAttributeIsRefused() {
        let levels = (1...9).map { i in "<!ENTITY lol\(i) \"" + String(repeating: "&lol\(i - 1);", count: 10) + "\">" }
        let xml = "<?xml version=\"1.0\"?><!DOCTYPE rss [<!ENTITY lol0 \"lol\">" + levels.joined() + "]>"
            + "<rss version=\"2.0\" a=\"&lol9;\"><channel><item><title>t</title></item></channel></rss>"
        let start = Clock.monotonicNanoseconds()
        let why = failure(xml)
        #expect(why == Self.refused || why.contains("entit"), "\(why)")
        #expect(Clock.elapsed(since: start) < .milliseconds(2000))
    }

    /// A text node longer than libxml2's own limit (10 MB: an entry whose
    /// content is a long inline image) fails the page saying so, at once
    /// (lifting the limit, `XML_PARSE_HUGE`, made libxml2 2.9's push parser
    /// quadratic: 19 s for 11 MB, over 120 s for 22 MB).
    @Test(arguments: ["", "<!DOCTYPE rss>"])
    func aTextNodeOverLibxml2sLimitIsRefusedNamingIt(doctype: String) throws {
        let long = String(repeating: "A", count: 11_000_000)
        let xml = "<?xml version=\"1.0\"?>\(doctype)<rss version=\"2.0\" xmlns:content=\"http://purl.org/rss/1.0/modules/content/\"><channel><title>t</title>"
            + "<item><guid>urn:1</guid><content:encoded><![CDATA[<img src=\"data:image/png;base64,\(long)\">]]></content:encoded></item>"
            + "<item><guid>urn:2</guid><title>two</title></item></channel></rss>"
        let start = Clock.monotonicNanoseconds()
        let why = failure(xml)
        #expect(why.contains("is longer than the 10,000,000 bytes libxml2 reads") && why.contains("the page is refused whole"), "\(why)")
        #expect(Clock.elapsed(since: start) < .seconds(10), "refused at the limit, not after reading on")
    }

    /// An attribute list in the internal subset is refused: libxml2 copies
    /// each default into every element it names, as the element is parsed
    /// (a 10 MB default and a page of empty elements).
    @Test func attributeListDeclarationsAreRefused() {
        let xml = "<?xml version=\"1.0\"?><!DOCTYPE rss [<!ATTLIST item x CDATA \"\(String(repeating: "d", count: 100_000))\">]>"
            + "<rss version=\"2.0\"><channel><title>t</title>" + String(repeating: "<item/>", count: 1000) + "</channel></rss>"
        #expect(failure(xml) == XMLStream.attributeListsRefused)
    }

    @Test func externalEntitiesAndDTDsAreNeitherReadNorFetched() {
        let before = XMLFeedStreamLoads.count
        #expect(failure("""
        <?xml version="1.0"?><!DOCTYPE rss [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
        <rss><channel><item><title>&xxe;</title></item></channel></rss>
        """) == Self.refused)
        // A parameter entity naming an external DTD on the network.
        #expect(failure("""
        <?xml version="1.0"?><!DOCTYPE rss [<!ENTITY % dtd SYSTEM "http://127.0.0.1:1/x.dtd"> %dtd;]>
        <rss><channel><item><title>x</title></item></channel></rss>
        """) == Self.refused)
        // An external DTD the document relies on for an entity: never loaded, the reference refused.
        #expect(failure("""
        <?xml version="1.0"?><!DOCTYPE rss SYSTEM "http://127.0.0.1:1/x.dtd">
        <rss><channel><item><title>&ext;</title></item></channel></rss>
        """) == "the entity reference &ext; is refused: entities are never read (a feed never needs them)")
        // RSS 0.91's own DOCTYPE (a PUBLIC DTD on the web) reads fine without being fetched.
        let rss091 = """
        <?xml version="1.0" encoding="ISO-8859-1" ?>
        <!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "http://my.netscape.com/publish/formats/rss-0.91.dtd">
        <rss version="0.91"><channel><title>WriteTheWeb</title><link>http://writetheweb.com</link>
        <item><title>Giving the world a pluggable Gnutella</title><link>http://writetheweb.com/read.php?item=24</link>
        <description>WorldOS is a framework on which to build programs that work like Freenet or Gnutella.</description></item>
        </channel></rss>
        """
        guard case .success(let p) = read(Array(rss091.utf8)) else { Issue.record("RSS 0.91 refused"); return }
        #expect(p.items.map { $0["id"] } == [.string("http://writetheweb.com/read.php?item=24")])
        #expect(XMLFeedStreamLoads.count == before)
    }

    @Test func depthOver64IsRefusedFast() {
        func nested(_ depth: Int) -> String {
            "<rss><channel><item><guid>1</guid><description>" + String(repeating: "<a>", count: depth - 4) + "x"
                + String(repeating: "</a>", count: depth - 4) + "</description></item></channel></rss>"
        }
        #expect(failure(nested(64)) == "")
        #expect(failure(nested(65)) == "nested deeper than 64 elements")
        let start = Clock.monotonicNanoseconds()
        #expect(failure(nested(10_000)) == "nested deeper than 64 elements")
        #expect(Clock.elapsed(since: start) < .milliseconds(1000))
    }

    // MARK: Roots and malformed documents

    @Test func otherRootsAndHTMLAreRefused() {
        #expect(failure("<?xml version=\"1.0\"?><opml version=\"2.0\"><body/></opml>") == "an XML document whose root is <opml>, not RSS or Atom")
        #expect(failure("<feed xmlns=\"http://purl.org/atom/ns#\"><title>0.3</title></feed>")
            == "an XML document whose root is <feed> (namespace http://purl.org/atom/ns#), not RSS or Atom")
        #expect(failure("<!DOCTYPE html><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>x</title></head><body/></html>")
            == XMLFeedMapping.htmlRefusal)
        // HTML that is no XML at all: refused as HTML, not as malformed XML.
        #expect(failure("<!DOCTYPE html>\n<html lang=en><head><meta charset=\"utf-8\"><title>Not found</title></head><body><p>x<br></body></html>")
            == XMLFeedMapping.htmlRefusal)
        #expect(failure("<!doctype html>\n<HTML><HEAD><META charset=utf-8></HEAD></HTML>") == XMLFeedMapping.htmlRefusal)
        #expect(failure("") == "an empty document, not RSS or Atom")
    }

    @Test func malformedXMLNamesItsLine() {
        let message = failure("<rss version=\"2.0\">\n<channel>\n<item>\n<title>x</title>\n</channel>\n</rss>")
        #expect(message == "the XML is not well-formed: line 5: Opening and ending tag mismatch: item line 3 and channel")
        #expect(failure("{\"items\": []}").hasPrefix("the XML is not well-formed: line 1: "))
    }

    @Test func looksLikeXML() {
        #expect(XMLFeedReader.looksLikeXML(Array("<rss/>".utf8)))
        #expect(XMLFeedReader.looksLikeXML([0xEF, 0xBB, 0xBF] + Array(" \r\n\t<?xml version=\"1.0\"?>".utf8)))
        #expect(!XMLFeedReader.looksLikeXML(Array(" {\"items\":[]}".utf8)))
        #expect(!XMLFeedReader.looksLikeXML([]))
        #expect(!XMLFeedReader.looksLikeXML([0xEF, 0xBB, 0xBF]))
    }

    @Test func libxml2WritesNothingOnStandardError() throws {
        var pipeEnds: [Int32] = [0, 0]
        try #require(pipe(&pipeEnds) == 0)
        let saved = dup(2)
        dup2(pipeEnds[1], 2)
        _ = failure("<rss>\n<channel><item>\n</channel></rss>")
        _ = failure("<rss xmlns:a=\"x\"><b:c/><channel/></rss>")
        _ = failure("<?xml version=\"1.0\"?><!DOCTYPE rss SYSTEM \"http://127.0.0.1:1/x.dtd\"><rss>&ext;</rss>")
        dup2(saved, 2)
        close(saved)
        close(pipeEnds[1])
        _ = fcntl(pipeEnds[0], F_SETFL, O_NONBLOCK)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(pipeEnds[0], &buffer, buffer.count)
        close(pipeEnds[0])
        let written = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
        // Only libxml2's own lines count (the test runner may write there too).
        #expect(!written.contains("parser error") && !written.contains("namespace error") && !written.contains("warning :"))
    }

    // MARK: Encodings and escapes

    @Test func cdataAndEscapedHTMLAreTheSameString() throws {
        let cdata = try XMLFeedReader.read(Array("<rss><channel><item><guid>1</guid><description><![CDATA[<p>A &amp; B</p>]]></description></item></channel></rss>".utf8), charset: nil)
        let escaped = try XMLFeedReader.read(Array("<rss><channel><item><guid>1</guid><description>&lt;p>A &amp;amp; B&lt;/p&gt;</description></item></channel></rss>".utf8), charset: nil)
        #expect(cdata.items[0]["content_html"] == .string("<p>A &amp; B</p>"))
        #expect(escaped.items[0]["content_html"] == cdata.items[0]["content_html"])
    }


    static func document(_ declaration: String, title: [UInt8]) -> [UInt8] {
        Array("<?xml version=\"1.0\" encoding=\"\(declaration)\"?><rss><channel><item><guid>1</guid><title>".utf8)
            + title + Array("</title></item></channel></rss>".utf8)
    }

    static func title(_ bytes: [UInt8], charset: String? = nil) -> JSON? {
        guard case .success(let p) = read(bytes, charset: charset) else { return nil }
        return p.items.first?["title"]
    }

    @Test func declaredEncodingsArriveAsUTF8() {
        #expect(Self.title(Self.document("ISO-8859-1", title: [0x63, 0x61, 0x66, 0xE9])) == .string("café"))
        #expect(Self.title(Self.document("windows-1252", title: [0x80, 0x20, 0x93, 0x71, 0x94])) == .string("€ \u{201C}q\u{201D}"))
        #expect(Self.title([0xEF, 0xBB, 0xBF] + Self.document("UTF-8", title: Array("café".utf8))) == .string("café"))
        #expect(Self.title([0xEF, 0xBB, 0xBF] + Array("<rss><channel><item><guid>1</guid><title>ü</title></item></channel></rss>".utf8)) == .string("ü"))
    }

    @Test func theContentTypesCharsetWinsOverTheDeclaration() {
        // Declared ISO-8859-1, served (and written) as UTF-8.
        #expect(Self.title(Self.document("ISO-8859-1", title: Array("café".utf8)), charset: "utf-8") == .string("café"))
        // Declared UTF-8, served as windows-1252.
        #expect(Self.title(Self.document("UTF-8", title: [0x80]), charset: "windows-1252") == .string("€"))
        #expect(Self.title(Self.document("UTF-8", title: [0xE9]), charset: "ISO-8859-1") == .string("é"))
        guard case .failure(let error) = read(Self.document("UTF-8", title: [0x41]), charset: "x-no-such-charset") else {
            Issue.record("an unknown charset was read"); return
        }
        #expect(error.description.hasPrefix("the Content-Type's charset x-no-such-charset is not one a feed is read in"))
        // UTF-7 would turn +ADw- into a < the document never showed: refused; a huge name is cut.
        guard case .failure(let seven) = read(Self.document("UTF-8", title: [0x41]), charset: "UTF-7"),
              case .failure(let huge) = read(Self.document("UTF-8", title: [0x41]), charset: String(repeating: "x", count: 50_000)) else {
            Issue.record("UTF-7 or a 50,000-byte charset was read"); return
        }
        #expect(seven.description.hasPrefix("the Content-Type's charset UTF-7 is not one"))
        #expect(huge.description.utf8.count < 400 && huge.description.contains("more bytes)"))
        // Bytes that are not UTF-8 in a UTF-8 document: libxml2's error with the line.
        guard case .failure(let bad) = read(Self.document("UTF-8", title: [0xE9, 0x41])) else { Issue.record("bad UTF-8 read"); return }
        #expect(bad.description.hasPrefix("the XML is not well-formed: line 1: "))
        // On one line: libxml2's own message breaks before "Bytes: 0xE9 ...".
        #expect(!bad.description.contains("\n") && bad.description.contains("Bytes: 0x"), "\(bad)")
    }

    // MARK: Memory

    /// A 50 MB page of 100,000 items: the peak resident size while it is
    /// read (VmHWM after resetting it through /proc/self/clear_refs).
    /// Slow in a debug build, so run on demand: XMLFEED_MEMORY=1.
    @Test(.enabled(if: getenv("XMLFEED_MEMORY") != nil)) func aFiftyMegabytePageReadsInBoundedMemory() throws {
        var body: [UInt8] = []
        body.reserveCapacity(52_000_000)
        body += Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rss version=\"2.0\" xmlns:content=\"http://purl.org/rss/1.0/modules/content/\"><channel><title>big</title>\n".utf8)
        let filler = String(repeating: "lorem ipsum dolor sit amet ", count: 14)
        for i in 0..<100_000 {
            body += Array("<item><title>Item \(i)</title><link>https://e.org/\(i)</link><guid>https://e.org/\(i)</guid><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate><description><![CDATA[<p>\(filler)</p>]]></description><category>c</category></item>\n".utf8)
        }
        body += Array("</channel></rss>\n".utf8)
        let before = Self.status("VmRSS")
        #expect(Self.resetPeak())
        let start = Clock.monotonicNanoseconds()
        let p = try XMLFeedReader.read(body, charset: nil)
        let took = Clock.elapsed(since: start)
        let peak = Self.status("VmHWM")
        let after = Self.status("VmRSS")
        #expect(p.items.count == 100_000)
        print("XMLFeed memory: input \(body.count >> 20) MiB; VmRSS before read \(before >> 20) MiB, peak during read \(peak >> 20) MiB, "
              + "after (items held) \(after >> 20) MiB; read in \(took)")
        #expect(peak - before < 400 << 20)
    }

    static func status(_ field: String) -> Int {
        guard let file = fopen("/proc/self/status", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, 256, file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix(field + ":") { return (Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0) << 10 }
        }
        return 0
    }

    /// Linux 4.0+: writing 5 to clear_refs resets VmHWM to the current size.
    static func resetPeak() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }
}

enum XMLFeedStreamLoads {
    static var count: Int { XMLStream.externalLoads.load(ordering: .relaxed) }
}
