import Testing
@testable import CacheService
import CacheProtocol

/// Relative URLs in RSS and Atom (RFC 4287, XML Base), resolved against the
/// nearest `xml:base`, else the URL that answered: the newcomer's Atom feed
/// stored `"url":"../blog/1.html"` and `"image":"a.png"`, and its image
/// rows fetched the wrong URL.
@Suite struct XMLFeedURLTests {
    static func items(_ xml: String, url: String?) throws -> [String] {
        try XMLFeedReader.read(Array(xml.utf8), charset: nil, url: url).items.map { String(decoding: $0.encoded, as: UTF8.self) }
    }

    @Test func atomURLsResolveAgainstXMLBaseThenTheDocument() throws {
        let atom = """
        <feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://h.test/img/">
          <entry><id>urn:e1</id><link rel="alternate" href="../blog/1.html"/>
            <link rel="enclosure" type="image/png" href="a.png"/>
            <author><name>A</name><uri>/people/a</uri></author></entry>
          <entry xml:base="https://other.test/x/"><id>urn:e2</id><link href="2.html"/>
            <link rel="enclosure" type="image/png" href="https://cdn.test/c.png"/></entry>
          <entry><link href="3.html"/></entry>
        </feed>
        """
        #expect(try Self.items(atom, url: "http://h.test/feeds/atom.xml") == [
            #"{"id":"urn:e1","url":"http://h.test/blog/1.html","authors":[{"name":"A","url":"http://h.test/people/a"}],"#
                + #""image":"http://h.test/img/a.png","attachments":[{"url":"http://h.test/img/a.png","mime_type":"image/png"}]}"#,
            #"{"id":"urn:e2","url":"https://other.test/x/2.html","image":"https://cdn.test/c.png","#
                + #""attachments":[{"url":"https://cdn.test/c.png","mime_type":"image/png"}]}"#,
            #"{"id":"3.html","url":"http://h.test/img/3.html"}"#,
        ], "the id keeps the link as written")
    }

    @Test func rssURLsResolveAgainstTheURLThatAnswered() throws {
        let rss = """
        <rss version="2.0" xmlns:media="http://search.yahoo.com/mrss/"><channel>
          <item><guid>7</guid><link>/posts/7</link><media:content url="../img/7.jpg" medium="image"/></item>
          <item><guid>https://h.test/p/8</guid><enclosure url="img/8.png" type="image/png"/></item>
          <item><guid>9</guid></item>
        </channel></rss>
        """
        #expect(try Self.items(rss, url: "https://h.test/feeds/rss.xml") == [
            #"{"id":"7","url":"https://h.test/posts/7","image":"https://h.test/img/7.jpg","attachments":[{"url":"https://h.test/img/7.jpg"}]}"#,
            #"{"id":"https://h.test/p/8","url":"https://h.test/p/8","image":"https://h.test/feeds/img/8.png","#
                + #""attachments":[{"url":"https://h.test/feeds/img/8.png","mime_type":"image/png"}]}"#,
            #"{"id":"9"}"#,
        ], "a guid that is no URL gives no url")
        // An xml:base of another scheme, or relative with nothing to resolve
        // it against, is ignored: the URL resolves against what is left.
        let ftp = #"<feed xmlns="http://www.w3.org/2005/Atom" xml:base="ftp://f.test/x/"><entry><id>1</id><link href="a.html"/></entry></feed>"#
        #expect(try Self.items(ftp, url: "https://h.test/f/atom.xml") == [#"{"id":"1","url":"https://h.test/f/a.html"}"#])
        #expect(try Self.items(ftp, url: nil) == [#"{"id":"1","url":"a.html"}"#])
        let file = #"<feed xmlns="http://www.w3.org/2005/Atom"><entry xml:base="file:///etc/"><id>2</id><link href="passwd"/></entry></feed>"#
        #expect(try Self.items(file, url: "https://h.test/f/atom.xml") == [#"{"id":"2","url":"https://h.test/f/passwd"}"#])
        // Without the document's URL, relative URLs are kept as written.
        #expect(try Self.items(rss, url: nil).first == #"{"id":"7","url":"/posts/7","image":"../img/7.jpg","attachments":[{"url":"../img/7.jpg"}]}"#)
    }
}
