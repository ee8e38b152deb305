import Testing
@testable import CacheService
import CacheProtocol

/// Reads `xml` and returns the page.
private func page(_ xml: String, charset: String? = nil) throws(FeedError) -> XMLFeedPage {
    try XMLFeedReader.read(Array(xml.utf8), charset: charset)
}

/// Each item as compact JSON text.
private func itemTexts(_ xml: String) throws -> [String] {
    try page(xml).items.map { String(decoding: $0.encoded, as: UTF8.self) }
}

/// Feeds shaped as real publishers write them (RSS 2.0, RSS 1.0, Atom 1.0,
/// Apple podcasts, Media RSS), each mapping rule.
@Suite struct XMLFeedTests {
    // MARK: RSS 2.0

    /// A WordPress blog: content:encoded in CDATA, dc:creator, a description
    /// (the excerpt) that becomes the summary, categories, a guid that is no
    /// permalink, RFC 5005's next page as atom:link in the channel.
    static let wordpress = """
    <?xml version="1.0" encoding="UTF-8"?><rss version="2.0"
        xmlns:content="http://purl.org/rss/1.0/modules/content/"
        xmlns:wfw="http://wellformedweb.org/CommentAPI/"
        xmlns:creator="http://purl.org/dc/elements/1.1/"
        xmlns:atom="http://www.w3.org/2005/Atom"
        xmlns:sy="http://purl.org/rss/1.0/modules/syndication/">
    <channel>
        <title>A Blog</title>
        <atom:link href="https://blog.example.org/feed/" rel="self" type="application/rss+xml" />
        <atom:link href="https://blog.example.org/feed/?paged=2" rel="next" type="application/rss+xml" />
        <link>https://blog.example.org</link>
        <description>Just another WordPress site</description>
        <lastBuildDate>Mon, 03 Jun 2024 09:12:44 +0000</lastBuildDate>
        <sy:updatePeriod>hourly</sy:updatePeriod>
        <item>
            <title>Hello &amp; welcome</title>
            <link>https://blog.example.org/2024/06/hello/</link>
            <comments>https://blog.example.org/2024/06/hello/#respond</comments>
            <creator:creator><![CDATA[Jane Doe]]></creator:creator>
            <pubDate>Mon, 03 Jun 2024 09:12:44 +0000</pubDate>
            <category><![CDATA[News]]></category>
            <category><![CDATA[Swift]]></category>
            <guid isPermaLink="false">https://blog.example.org/?p=42</guid>
            <description><![CDATA[<p>The excerpt [&#8230;]</p>]]></description>
            <content:encoded><![CDATA[<p>Full <b>text</b> &amp; more.</p>
    <p>Second paragraph.</p>]]></content:encoded>
            <wfw:commentRss>https://blog.example.org/2024/06/hello/feed/</wfw:commentRss>
        </item>
        <item>
            <title>Plain</title>
            <link>https://blog.example.org/2024/05/plain/</link>
            <pubDate>Fri, 31 May 2024 18:00:00 GMT</pubDate>
            <description>&lt;p&gt;Only a description &amp;amp; no content.&lt;/p&gt;</description>
        </item>
    </channel>
    </rss>
    """

    @Test func aWordPressFeedWithContentEncodedCreatorAndNextPage() throws {
        let p = try page(Self.wordpress)
        #expect(p.format == .rss2)
        #expect(p.next == "https://blog.example.org/feed/?paged=2")
        let texts = try itemTexts(Self.wordpress)
        #expect(texts == [
            #"{"id":"https://blog.example.org/?p=42","url":"https://blog.example.org/2024/06/hello/","title":"Hello & welcome","#
                + #""content_html":"<p>Full <b>text</b> &amp; more.</p>\n<p>Second paragraph.</p>","summary":"The excerpt […]","#
                + #""date_published":"2024-06-03T09:12:44Z","authors":[{"name":"Jane Doe"}],"tags":["News","Swift"]}"#,
            #"{"id":"https://blog.example.org/2024/05/plain/","url":"https://blog.example.org/2024/05/plain/","title":"Plain","#
                + #""content_html":"<p>Only a description &amp; no content.</p>","date_published":"2024-05-31T18:00:00Z"}"#,
        ])
    }

    @Test func rssIdAndURLFallBackOnEachOther() throws {
        let texts = try itemTexts("""
        <rss version="2.0"><channel>
        <item><link>https://e.org/a</link></item>
        <item><guid>https://e.org/b</guid></item>
        <item><guid isPermaLink="true">https://e.org/c</guid></item>
        <item><guid isPermaLink="false">tag:e.org,2024:d</guid></item>
        <item><title>no id at all</title><author>me@e.org (Me)</author></item>
        <item><guid>  </guid><link>
            https://e.org/f
        </link></item>
        </channel></rss>
        """)
        #expect(texts == [
            #"{"id":"https://e.org/a","url":"https://e.org/a"}"#,
            #"{"id":"https://e.org/b","url":"https://e.org/b"}"#,
            #"{"id":"https://e.org/c","url":"https://e.org/c"}"#,
            #"{"id":"tag:e.org,2024:d"}"#,
            #"{"title":"no id at all","authors":[{"name":"me@e.org (Me)"}]}"#,
            #"{"id":"https://e.org/f","url":"https://e.org/f"}"#,
        ])
    }

    @Test func enclosuresAreAttachmentsWithAValidSizeOnly() throws {
        let p = try page("""
        <rss version="2.0"><channel><item><guid>1</guid>
        <enclosure url="https://e.org/a.mp3" type="audio/mpeg" length="12345678"/>
        <enclosure url="https://e.org/b.ogg" type="audio/ogg" length="-5"/>
        <enclosure url="https://e.org/c.bin" length="12abc"/>
        <enclosure url="https://e.org/d.bin" type="application/pdf" length=""/>
        <enclosure type="audio/mpeg" length="1"/>
        </item></channel></rss>
        """)
        #expect(String(decoding: p.items[0].encoded, as: UTF8.self) == #"{"id":"1","attachments":["#
            + #"{"url":"https://e.org/a.mp3","mime_type":"audio/mpeg","size_in_bytes":12345678},"#
            + #"{"url":"https://e.org/b.ogg","mime_type":"audio/ogg"},{"url":"https://e.org/c.bin"},"#
            + #"{"url":"https://e.org/d.bin","mime_type":"application/pdf"}]}"#)
        #expect(p.next == nil)
    }

    // MARK: Podcasts and images

    /// An Apple podcast feed: the show's itunes:image (after the first
    /// episode, as some hosts write it), episodes with an audio enclosure,
    /// one with its own itunes:image, one with Media RSS.
    static let podcast = """
    <?xml version="1.0" encoding="UTF-8"?>
    <rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:m="http://search.yahoo.com/mrss/"
         xmlns:content="http://purl.org/rss/1.0/modules/content/">
      <channel>
        <title>Hiking Treks</title>
        <link>https://www.apple.com/itunes/podcasts/</link>
        <language>en-us</language>
        <itunes:author>The Sunset Explorers</itunes:author>
        <item>
          <itunes:episodeType>trailer</itunes:episodeType>
          <title>Hiking Treks Trailer</title>
          <description><![CDATA[The Sunset Explorers share tips.]]></description>
          <enclosure length="498537" type="audio/mpeg" url="http://example.com/podcasts/everything/AllAboutEverythingEpisode4.mp3"/>
          <guid>D03EEC9B-B1B4-475B-92C8-54F853FA2A22</guid>
          <pubDate>Tue, 8 Jan 2019 01:15:00 GMT</pubDate>
          <itunes:duration>1079</itunes:duration>
        </item>
        <itunes:image href="https://applehosted.podcasts/hiking/show.jpg"/>
        <item>
          <title>Episode 1</title>
          <enclosure length="5650889" type="audio/mpeg" url="http://example.com/ep1.mp3"/>
          <enclosure length="1024" type="image/jpeg" url="http://example.com/ep1-art.jpg"/>
          <itunes:image href="http://example.com/ep1-itunes.jpg"/>
          <guid>ep1</guid>
        </item>
        <item>
          <guid>ep2</guid>
          <itunes:image href="http://example.com/ep2-itunes.jpg"/>
          <m:group><m:content url="http://example.com/ep2.mp4" type="video/mp4"/><m:thumbnail url="http://example.com/ep2-thumb.jpg"/></m:group>
        </item>
        <item>
          <guid>ep3</guid>
          <m:thumbnail url="http://example.com/ep3-thumb.jpg"/>
          <m:content url="http://example.com/ep3.jpg" medium="image"/>
          <itunes:image href="http://example.com/ep3-itunes.jpg"/>
        </item>
        <item><guid>ep4</guid><itunes:image href="http://example.com/ep4-itunes.jpg"/></item>
        <item><guid>ep5</guid></item>
      </channel>
    </rss>
    """

    @Test func aPodcastsImagesAndAudioEnclosures() throws {
        let p = try page(Self.podcast)
        #expect(String(decoding: p.items[0].encoded, as: UTF8.self) == #"{"id":"D03EEC9B-B1B4-475B-92C8-54F853FA2A22","#
            + #""title":"Hiking Treks Trailer","#
            + #""content_html":"The Sunset Explorers share tips.","date_published":"2019-01-08T01:15:00Z","#
            + #""image":"https://applehosted.podcasts/hiking/show.jpg","#
            + #""attachments":[{"url":"http://example.com/podcasts/everything/AllAboutEverythingEpisode4.mp3","mime_type":"audio/mpeg","size_in_bytes":498537}]}"#)
        // An image enclosure first, then media:content, media:thumbnail (in media:group too), the item's itunes:image, the show's.
        #expect(p.items.map { $0["image"] } == [
            .string("https://applehosted.podcasts/hiking/show.jpg"),
            .string("http://example.com/ep1-art.jpg"),
            .string("http://example.com/ep2-thumb.jpg"),
            .string("http://example.com/ep3.jpg"),
            .string("http://example.com/ep4-itunes.jpg"),
            .string("https://applehosted.podcasts/hiking/show.jpg"),
        ])
        #expect(p.items[1]["attachments"]?.array?.count == 2)
    }

    // MARK: Atom

    /// RFC 4287's extensive example, with a next page (RFC 5005), an
    /// enclosure and a second entry whose id falls back on its link.
    static let atom = """
    <?xml version="1.0" encoding="utf-8"?>
    <feed xmlns="http://www.w3.org/2005/Atom">
      <title type="text">dive into mark</title>
      <updated>2005-07-31T12:29:29Z</updated>
      <id>tag:example.org,2003:3</id>
      <link rel="alternate" type="text/html" hreflang="en" href="http://example.org/"/>
      <link rel="self" type="application/atom+xml" href="http://example.org/feed.atom"/>
      <link rel="next" href="http://example.org/feed.atom?page=2"/>
      <author><name>Feed Author</name></author>
      <entry>
        <title type="html">Atom draft-07 snapshot &lt;em&gt;now&lt;/em&gt;</title>
        <link rel="alternate" type="text/html" href="http://example.org/2005/04/02/atom"/>
        <link rel="enclosure" type="audio/mpeg" length="1337" href="http://example.org/audio/ph34r_my_podcast.mp3"/>
        <link rel="enclosure" type="image/png" href="http://example.org/cover.png"/>
        <id>tag:example.org,2003:3.2397</id>
        <updated>2005-07-31T12:29:29Z</updated>
        <published>2003-12-13T08:29:29-04:00</published>
        <author>
          <name>Mark Pilgrim</name>
          <uri>http://example.org/</uri>
          <email>f8dy@example.com</email>
        </author>
        <contributor><name>Sam Ruby</name></contributor>
        <category term="atom" scheme="http://example.org/tags"/>
        <summary>A short summary.</summary>
        <content type="xhtml" xml:lang="en" xml:base="http://diveintomark.org/">
          <div xmlns="http://www.w3.org/1999/xhtml">
            <p><i>[Update: The Atom draft is finished.]</i> A &amp; B &lt; C<br/>next line <img src="a.png" alt="x &quot;y&quot;"/></p>
          </div>
        </content>
      </entry>
      <entry>
        <title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">An <b>XHTML</b> title</div></title>
        <link href="http://example.org/2005/04/03/second"/>
        <updated>2005-08-01T00:00:00+02:00</updated>
        <content>Plain &lt;text&gt; content</content>
      </entry>
      <entry>
        <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
        <content type="html">&lt;p&gt;Escaped&lt;/p&gt;</content>
        <summary type="html"><![CDATA[<b>Bold</b> summary]]></summary>
      </entry>
    </feed>
    """

    @Test func anAtomFeedWithNextAlternateEnclosureAndXHTML() throws {
        let p = try page(Self.atom)
        #expect(p.format == .atom)
        #expect(p.next == "http://example.org/feed.atom?page=2")
        let texts = try itemTexts(Self.atom)
        #expect(texts == [
            #"{"id":"tag:example.org,2003:3.2397","url":"http://example.org/2005/04/02/atom","#
                + #""title":"Atom draft-07 snapshot now","#
                + #""content_html":"<p><i>[Update: The Atom draft is finished.]</i> A &amp; B &lt; C<br>next line <img src=\"a.png\" alt=\"x &quot;y&quot;\"></p>","#
                + #""summary":"A short summary.","date_published":"2003-12-13T12:29:29Z","date_modified":"2005-07-31T12:29:29Z","#
                + #""authors":[{"name":"Mark Pilgrim","url":"http://example.org/"}],"image":"http://example.org/cover.png","#
                + #""attachments":[{"url":"http://example.org/audio/ph34r_my_podcast.mp3","mime_type":"audio/mpeg","size_in_bytes":1337},"#
                + #"{"url":"http://example.org/cover.png","mime_type":"image/png"}],"tags":["atom"]}"#,
            #"{"id":"http://example.org/2005/04/03/second","url":"http://example.org/2005/04/03/second","#
                + #""title":"An XHTML title","content_text":"Plain <text> content","date_modified":"2005-07-31T22:00:00Z"}"#,
            #"{"id":"urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a","content_html":"<p>Escaped</p>","summary":"Bold summary"}"#,
        ])
    }

    @Test func atomNamespacesGoByURINotPrefix() throws {
        let p = try page("""
        <a:feed xmlns:a="http://www.w3.org/2005/Atom" xmlns="http://example.org/other">
          <a:entry><a:id>1</a:id><title>not Atom's</title><a:title>Atom's</a:title></a:entry>
        </a:feed>
        """)
        #expect(p.items == [.object([("id", .string("1")), ("title", .string("Atom's"))])])
    }

    // MARK: RSS 1.0

    static let rss1 = """
    <?xml version="1.0"?>
    <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:dc="http://purl.org/dc/elements/1.1/"
      xmlns="http://purl.org/rss/1.0/">
      <channel rdf:about="http://www.xml.com/xml/news.rss">
        <title>XML.com</title>
        <link>http://xml.com/pub</link>
        <items><rdf:Seq><rdf:li resource="http://xml.com/pub/2000/08/09/xslt/xslt.html" /></rdf:Seq></items>
      </channel>
      <item rdf:about="http://xml.com/pub/2000/08/09/xslt/xslt.html">
        <title>Processing Inclusions with XSLT</title>
        <link>http://xml.com/pub/2000/08/09/xslt/xslt.html</link>
        <description>Processing document inclusions with general XML tools can be problematic.</description>
        <dc:date>2000-08-09T12:00:00+01:00</dc:date>
        <dc:creator>Bob DuCharme</dc:creator>
      </item>
      <item><link>http://xml.com/pub/2000/08/09/rdfdb/index.html</link><dc:date>2000-08-10</dc:date></item>
    </rdf:RDF>
    """

    @Test func rss1WithAboutAndDublinCoreDates() throws {
        let p = try page(Self.rss1)
        #expect(p.format == .rss1)
        let texts = try itemTexts(Self.rss1)
        #expect(texts == [
            #"{"id":"http://xml.com/pub/2000/08/09/xslt/xslt.html","url":"http://xml.com/pub/2000/08/09/xslt/xslt.html","#
                + #""title":"Processing Inclusions with XSLT","#
                + #""content_html":"Processing document inclusions with general XML tools can be problematic.","#
                + #""date_published":"2000-08-09T11:00:00Z","authors":[{"name":"Bob DuCharme"}]}"#,
            #"{"id":"http://xml.com/pub/2000/08/09/rdfdb/index.html","url":"http://xml.com/pub/2000/08/09/rdfdb/index.html","#
                + #""date_published":"2000-08-10T00:00:00Z"}"#,
        ])
    }
}
