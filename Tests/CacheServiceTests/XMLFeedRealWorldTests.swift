import Testing
@testable import CacheService
import CacheProtocol

/// Feeds as particular generators write them, where the mapping once went
/// wrong for real feeds (the newcomer's review of 7 December): WordPress's
/// Atom titles, the Guardian's media, windows-1252 declared as ISO-8859-1,
/// feeds served as `text/html`, RSS 0.90.
@Suite struct XMLFeedRealWorldTests {
    private func items(_ xml: [UInt8], charset: String? = nil) throws -> [JSON] {
        try XMLFeedReader.read(xml, charset: charset).items
    }

    private func items(_ xml: String, charset: String? = nil) throws -> [JSON] {
        try items(Array(xml.utf8), charset: charset)
    }

    /// WordPress's feed-atom.php writes `<title type="html"><![CDATA[<?php
    /// the_title_rss(); ?>]]></title>` and the excerpt as an html summary:
    /// JSON Feed's `title` and `summary` are plain text, so that a search
    /// for "It’s" finds the post.
    @Test func wordpressAtomTitlesAreTheirText() throws {
        let got = try items("""
        <?xml version="1.0" encoding="UTF-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom" xmlns:thr="http://purl.org/syndication/thread/1.0" xml:lang="en-US"
          xml:base="https://example.wordpress.org/wp-atom.php">
          <title type="text">Example</title>
          <entry>
            <author><name>alice</name><uri>https://example.wordpress.org</uri></author>
            <title type="html"><![CDATA[It&#8217;s &#8220;Quoted&#8221; &#038; Ampersanded]]></title>
            <link rel="alternate" type="text/html" href="https://example.wordpress.org/2024/01/10/quoted/"/>
            <id>https://example.wordpress.org/?p=42</id>
            <updated>2024-01-10T14:01:02Z</updated>
            <published>2024-01-10T14:00:00Z</published>
            <summary type="html"><![CDATA[<p>An excerpt&nbsp;with <em>markup</em>,<br/>two&hellip;</p><script>alert(1)</script>]]></summary>
            <content type="html" xml:base="https://example.wordpress.org/2024/01/10/quoted/"><![CDATA[<p>It&#8217;s here.</p>]]></content>
          </entry>
          <entry>
            <title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">Less <b>than</b>
              &lt;3</div></title>
            <id>tag:example.org,2024:2</id>
            <summary type="text">  plain   text stays   as written </summary>
          </entry>
        </feed>
        """)
        #expect(got.count == 2)
        #expect(got[0]["title"] == .string("It\u{2019}s \u{201C}Quoted\u{201D} & Ampersanded"))
        #expect(got[0]["summary"] == .string("An excerpt\u{A0}with markup, two\u{2026}"))
        #expect(got[0]["content_html"] == .string("<p>It&#8217;s here.</p>"), "content_html stays HTML")
        #expect(got[1]["title"] == .string("Less than <3"))
        #expect(got[1]["summary"] == .string("plain   text stays   as written"))
    }

    /// RSS's description as the summary (beside content:encoded) is HTML too.
    @Test func anRSSSummaryIsItsText() throws {
        let got = try items("""
        <rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><item>
          <guid>1</guid><title>One</title>
          <description><![CDATA[<p>The excerpt [&#8230;]</p>]]></description>
          <content:encoded><![CDATA[<p>Full</p>]]></content:encoded>
        </item></channel></rss>
        """)
        #expect(got.first?["summary"] == .string("The excerpt [\u{2026}]"))
        #expect(got.first?["content_html"] == .string("<p>Full</p>"))
    }

    @Test func htmlTextLeavesScriptsOutAndReadsAnyDepth() {
        #expect(HTMLText.plain("a<style>p{}</style>b<script>x()</script>c") == "abc")
        #expect(HTMLText.plain("one<br>two<p>three</p>four") == "one two three four")
        #expect(HTMLText.plain("&amp;lt; &#x41;&#66; &unknownentity; <") == "&lt; AB &unknownentity; <")
        #expect(HTMLText.plain("  no markup\n at all ") == "no markup at all")
        let deep = String(repeating: "<b>", count: 5000) + "deep" + String(repeating: "</b>", count: 5000)
        #expect(!HTMLText.plain("top " + deep).contains("<"), "a deep nest is read without markup, and without a crash")
    }

    /// The Guardian's items carry `<media:content width="140" url="...">`
    /// with neither `medium` nor `type` (both optional in Media RSS): an
    /// image candidate after the typed images and the thumbnails, unless its
    /// URL names audio, video or a document.
    @Test func mediaContentWithNeitherMediumNorTypeIsAnImage() throws {
        let got = try items("""
        <rss xmlns:media="http://search.yahoo.com/mrss/" xmlns:dc="http://purl.org/dc/elements/1.1/" version="2.0"><channel>
          <item>
            <title>A Guardian story</title>
            <link>https://www.theguardian.com/world/2024/jan/10/story</link>
            <guid>https://www.theguardian.com/world/2024/jan/10/story</guid>
            <media:content width="140" url="https://i.guim.co.uk/img/media/abc/0_0_5000_3000/master/5000.jpg?width=140&amp;quality=85&amp;auto=format&amp;fit=max&amp;s=1f2e">
              <media:credit scheme="urn:ebu">Photograph: Someone/Agency</media:credit>
            </media:content>
            <media:content width="460" url="https://i.guim.co.uk/img/media/abc/0_0_5000_3000/master/5000.jpg?width=460&amp;s=9a8b"/>
          </item>
          <item><guid>2</guid><media:content url="https://example.org/episode.mp3"/></item>
          <item><guid>3</guid><media:content url="https://example.org/clip"/><media:thumbnail url="https://example.org/thumb.jpg"/></item>
          <item><guid>4</guid><media:content url="https://example.org/talk.MP4?x=1"/></item>
        </channel></rss>
        """)
        #expect(got[0]["image"] == .string("https://i.guim.co.uk/img/media/abc/0_0_5000_3000/master/5000.jpg?width=140&quality=85&auto=format&fit=max&s=1f2e"))
        #expect(got[1]["image"] == nil, "an mp3 is no image")
        #expect(got[2]["image"] == .string("https://example.org/thumb.jpg"), "a thumbnail says it is an image")
        #expect(got[3]["image"] == nil)
    }

    /// A Mastodon toot's RSS item (its media as `media:content`, each with
    /// `type`, `fileSize` and `medium`): the first image is the item's
    /// `image`, and every medium object is an attachment (the second image
    /// and the video were stored nowhere); one an enclosure names is not
    /// listed twice.
    @Test func everyMediaObjectIsAnAttachment() throws {
        let got = try items("""
        <rss version="2.0" xmlns:webfeeds="http://webfeeds.org/rss/1.0" xmlns:media="http://search.yahoo.com/mrss/"><channel>
          <title>Alice</title>
          <item>
            <guid isPermaLink="true">https://mastodon.example/@alice/111</guid>
            <link>https://mastodon.example/@alice/111</link>
            <pubDate>Wed, 10 Jan 2024 14:01:02 +0000</pubDate>
            <description>&lt;p&gt;Two pictures and a clip&lt;/p&gt;</description>
            <media:content url="https://files.mastodon.example/a.png" type="image/png" fileSize="1234" medium="image">
              <media:rating scheme="urn:simple">nonadult</media:rating>
              <media:description type="plain">the first</media:description>
            </media:content>
            <media:content url="https://files.mastodon.example/b.jpeg" type="image/jpeg" fileSize="5678" medium="image"/>
            <media:content url="https://files.mastodon.example/c.mp4" type="video/mp4" fileSize="99999" medium="video"/>
            <enclosure url="https://files.mastodon.example/b.jpeg" type="image/jpeg" length="5678"/>
          </item>
        </channel></rss>
        """)
        #expect(got.first?["image"] == .string("https://files.mastodon.example/b.jpeg"), "an image enclosure comes first")
        let urls = got.first?["attachments"]?.array?.compactMap { $0["url"]?.string }
        #expect(urls == ["https://files.mastodon.example/b.jpeg", "https://files.mastodon.example/a.png", "https://files.mastodon.example/c.mp4"])
        #expect(got.first?["attachments"]?.array?.last == .object([("url", .string("https://files.mastodon.example/c.mp4")),
                                                                    ("mime_type", .string("video/mp4")), ("size_in_bytes", .number("99999"))]))
    }

    /// Bytes of windows-1252 declared ISO-8859-1 (what most Windows-made
    /// feeds are): read as browsers read them (WHATWG Encoding), from the
    /// declaration or from the HTTP charset, and so is US-ASCII.
    @Test func iso88591IsReadAsWindows1252() throws {
        func rss(_ declared: String) -> [UInt8] {
            Array("<?xml version=\"1.0\" encoding=\"\(declared)\"?>\n<rss version=\"2.0\"><channel><item><guid>1</guid><title>".utf8)
                + [0x93] + Array("Smart quotes".utf8) + [0x94] + Array(" cost ".utf8) + [0x80] + Array(" 5 ".utf8) + [0x96]
                + Array(" caf".utf8) + [0xE9] + Array("</title></item></channel></rss>".utf8)
        }
        let expected = JSON.string("\u{201C}Smart quotes\u{201D} cost \u{20AC} 5 \u{2013} caf\u{E9}")
        for declared in ["ISO-8859-1", "iso-8859-1", "latin1", "US-ASCII", "windows-1252"] {
            #expect(try items(rss(declared)).first?["title"] == expected, "declared \(declared)")
        }
        #expect(try items(rss("UTF-8"), charset: "ISO-8859-1").first?["title"] == expected, "the HTTP charset wins, read the same way")
        #expect(try items(rss("ISO-8859-1"), charset: "iso-8859-1").first?["title"] == expected)
        // Single quotes and spaces around '=' in the declaration.
        let spaced = Array("<?xml version='1.0' encoding = 'ISO-8859-1' ?>".utf8) + rss("x").drop { $0 != 0x0A }
        #expect(try items(spaced).first?["title"] == expected)
        // Decoded as libxml2 reads, a buffer at a time: characters of three
        // UTF-8 bytes across every buffer's end, and the five bytes windows-1252
        // leaves undefined (C1 controls, as WHATWG decodes them; iconv fails there).
        let many = Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss><channel><item><guid>1</guid><title>".utf8)
            + [UInt8](repeating: 0x80, count: 20_000) + [0x81, 0x8D, 0x8F, 0x90, 0x9D, 0x9F] + Array("</title></item></channel></rss>".utf8)
        #expect(try items(many).first?["title"] == .string(String(repeating: "\u{20AC}", count: 20_000) + "\u{81}\u{8D}\u{8F}\u{90}\u{9D}\u{178}"))
        // ISO-8859-2 is not windows-1252: its own table (0xE9 is é there too, 0xA3 is Ł).
        let latin2 = Array("<?xml version=\"1.0\" encoding=\"ISO-8859-2\"?><rss><channel><item><guid>1</guid><title>".utf8) + [0xA3, 0xE9]
            + Array("</title></item></channel></rss>".utf8)
        #expect(try items(latin2).first?["title"] == .string("\u{141}\u{E9}"))
    }

    @Test func theDeclaredEncodingIsReadFromTheDeclarationAlone() {
        #expect(XMLEncoding.declared(in: Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><rss/>".utf8)) == "ISO-8859-1")
        #expect(XMLEncoding.declared(in: [0xEF, 0xBB, 0xBF] + Array("<?xml version=\"1.0\" encoding='latin1'?>".utf8)) == "latin1")
        #expect(XMLEncoding.declared(in: Array("<?xml version=\"1.0\"?><rss encoding=\"latin1\"/>".utf8)) == nil)
        #expect(XMLEncoding.declared(in: Array("<rss/>".utf8)) == nil)
        #expect(XMLEncoding.declared(in: Array("<?xml encoding=\"bad name\"?>".utf8)) == nil)
        #expect(XMLEncoding.declared(in: Array("<?xml".utf8)) == nil)
    }

    /// RSS 0.90 (Netscape's first, 1999: its specification's own example):
    /// `rdf:RDF` with the items in its own namespace. Read as RSS 1.0 is;
    /// before, its items were not read at all and the feed stored as empty.
    @Test func rss090IsRead() throws {
        let got = try items("""
        <?xml version="1.0"?>
        <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://my.netscape.com/rdf/simple/0.9/">
          <channel>
            <title>Mozilla Dot Org</title>
            <link>http://www.mozilla.org</link>
            <description>the Mozilla Organization web site</description>
          </channel>
          <image><title>Mozilla</title><url>http://www.mozilla.org/images/moz.gif</url><link>http://www.mozilla.org</link></image>
          <item><title>New Status Updates</title><link>http://www.mozilla.org/status/</link></item>
          <item><title>Bugzilla Reorganized</title><link>http://www.mozilla.org/bugs/</link></item>
        </rdf:RDF>
        """)
        #expect(got.map { $0["id"] } == [.string("http://www.mozilla.org/status/"), .string("http://www.mozilla.org/bugs/")])
        #expect(got.map { $0["title"] } == [.string("New Status Updates"), .string("Bugzilla Reorganized")])
    }

    /// RSS 2.0 in the namespace UserLand's tools gave it: read as RSS 2.0.
    @Test func userlandNamespacedRSSIsRead() throws {
        let got = try items(#"<rss version="2.0" xmlns="http://backend.userland.com/rss2"><channel><title>t</title>"#
                            + #"<item><guid>g1</guid><title>One</title><link>http://e.test/1</link></item></channel></rss>"#)
        #expect(got == [.object([("id", .string("g1")), ("url", .string("http://e.test/1")), ("title", .string("One"))])])
    }

    /// A document declared ISO-8859-1 served with `charset=utf-8`: the
    /// charset wins (RFC 7303), and the failure says it did, where
    /// libxml2's message says the document gave no encoding.
    @Test func aCharsetThatOverridesTheDeclarationIsNamedWhenReadingFails() throws {
        let latin = Array(#"<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><item><guid>1</guid><title>caf"#.utf8) + [0xE9]
            + Array("</title></item></channel></rss>".utf8)
        #expect { try items(latin, charset: "utf-8") } throws: {
            "\($0)".contains(#"read as the Content-Type's charset utf-8, which wins over the document's declared encoding="ISO-8859-1" (RFC 7303)"#)
        }
        #expect(try items(latin, charset: "iso-8859-1").first?["title"] == .string("caf\u{E9}"))
    }

    /// Entries where the format puts them, named as entries, in a namespace
    /// the reader does not know: the page fails (the posts stay as they
    /// were) instead of being stored as a feed of no posts.
    @Test func entriesInAnUnknownNamespaceFailThePage() {
        let cases = [
            ("<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" xmlns=\"http://example.org/rss/9\">"
                + "<item><title>a</title><link>http://e/1</link></item><item><link>http://e/2</link></item></rdf:RDF>",
             "2 <item> elements are in namespace http://example.org/rss/9, not RSS 1.0's (http://purl.org/rss/1.0/)"),
            ("<rss version=\"2.0\"><channel><item xmlns=\"http://example.org/x\"><guid>1</guid></item></channel></rss>",
             "1 <item> element is in namespace http://example.org/x, not RSS 2.0's (no namespace)"),
            ("<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry><id>1</id></entry><x:entry xmlns:x=\"http://purl.org/atom/ns#\"/></feed>",
             "1 <entry> element is in namespace http://purl.org/atom/ns#, not Atom 1.0's"),
        ]
        for (xml, message) in cases {
            #expect { try items(xml) } throws: { "\($0)".contains(message) && "\($0)".contains("nothing was stored") }
        }
    }

    /// WHATWG MIME Sniffing 7.3: a feed a server labels `text/html` (a
    /// static file under `default_type text/html`) is read as the feed it
    /// is; an HTML page stays refused, saying what to do.
    @Test func aFeedServedAsTextHTMLIsReadAndAPageIsNot() {
        let feeds = ["<?xml version=\"1.0\"?>\n<rss version=\"2.0\"><channel/></rss>",
                     "\u{FEFF}<!-- generator: x -->\n<?xml-stylesheet href=\"s.xsl\"?><feed xmlns=\"http://www.w3.org/2005/Atom\"/>",
                     "<!DOCTYPE rss PUBLIC \"-//Netscape Communications//DTD RSS 0.91//EN\" \"http://my.netscape.com/publish/formats/rss-0.91.dtd\"><rss version=\"0.91\"/>",
                     "<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"/>"]
        for feed in feeds {
            #expect(FeedContent.htmlRefusal(Array(feed.utf8), contentType: "text/html; charset=UTF-8") == nil, "\(feed)")
        }
        let pages = ["<!DOCTYPE html><html><body><rss/></body></html>", "<html><head><title>x</title></head></html>",
                     "<div>hello</div>", "<!-- only a comment that never ends"]
        for page in pages {
            #expect(FeedContent.htmlRefusal(Array(page.utf8), contentType: "text/html")?.contains("an HTML page") == true, "\(page)")
        }
        // A feed whose first element is past the first 512 bytes is not sniffed as one.
        let late = "<!--" + String(repeating: "x", count: 600) + "--><rss/>"
        #expect(FeedContent.htmlRefusal(Array(late.utf8), contentType: "text/html") != nil)
    }
}
