import Testing
@testable import CacheService
import CacheProtocol

/// RSS's RFC 822 dates as feeds write them, and W3CDTF (Atom, dc:date),
/// to RFC 3339 in UTC.
@Suite struct XMLFeedDateTests {
    @Test(arguments: [
        ("Tue, 10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 +0200", "2003-06-10T02:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 -0530", "2003-06-10T09:30:00Z"),
        ("Tue, 10 Jun 2003 23:30:00 -0100", "2003-06-11T00:30:00Z"),
        ("Wed, 01 Jan 2003 00:30:00 +0100", "2002-12-31T23:30:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 EST", "2003-06-10T09:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 EDT", "2003-06-10T08:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 CST", "2003-06-10T10:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 CDT", "2003-06-10T09:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 MST", "2003-06-10T11:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 MDT", "2003-06-10T10:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 PST", "2003-06-10T12:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 PDT", "2003-06-10T11:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 UT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 Z", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 2003 04:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 03 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("Thu, 10 Jun 99 04:00:00 GMT", "1999-06-10T04:00:00Z"),
        ("Mon, 10 Jun 49 04:00:00 GMT", "2049-06-10T04:00:00Z"),
        ("Thu, 10 Jun 50 04:00:00 GMT", "1950-06-10T04:00:00Z"),
        ("10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 8 Jan 2019 01:15:00 GMT", "2019-01-08T01:15:00Z"),
        ("tue, 10 jun 2003 4:05:06 gmt", "2003-06-10T04:05:06Z"),
        ("Tuesday, 10 June 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 +02:00", "2003-06-10T02:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00", "2003-06-10T04:00:00Z"),
        ("  Tue, 29 Feb 2000 12:00:00 GMT\n", "2000-02-29T12:00:00Z"),
        ("2003-06-10T04:00:00Z", "2003-06-10T04:00:00Z"),
        // Seen in feeds, not RFC 822 (the newcomer's review of 7 December):
        // zones named otherwise, a fraction of the second, JavaScript's Date.toString, asctime.
        ("Wed, 10 Jan 2024 14:01:02 CET", "2024-01-10T13:01:02Z"),
        ("Wed, 10 Jul 2024 14:01:02 CEST", "2024-07-10T12:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02 JST", "2024-01-10T05:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02 AEDT", "2024-01-10T03:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02.123 GMT", "2024-01-10T14:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02.5 +0100", "2024-01-10T13:01:02Z"),
        ("Wed Jan 10 2024 14:01:02 GMT+0000 (Coordinated Universal Time)", "2024-01-10T14:01:02Z"),
        ("Wed Jan 10 2024 15:01:02 GMT+0100 (Central European Standard Time)", "2024-01-10T14:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02 UTC-05:00", "2024-01-10T19:01:02Z"),
        ("Wed Jan 10 14:01:02 2024", "2024-01-10T14:01:02Z"),
        ("Wed, 10 Jan 2024 14:01:02 +0000 (UTC)", "2024-01-10T14:01:02Z"),
    ])
    func rfc822(_ text: String, _ expected: String) {
        #expect(FeedDates.rfc822(text) == expected)
    }

    @Test(arguments: [
        "", "yesterday", "Tue, 31 Jun 2003 04:00:00 GMT", "Tue, 29 Feb 2003 04:00:00 GMT", "Tue, 10 Foo 2003 04:00:00 GMT",
        "Tue, 10 Jun 2003 24:00:00 GMT", "Tue, 10 Jun 2003 04:60:00 GMT", "Tue, 10 Jun 2003 04:00:00 XYZ",
        "Tue, 10 Jun 2003 04:00:00 +2", "Tue, 10 Jun 203 04:00:00 GMT", "Tue, 10 Jun 2003 04 GMT", "Tue, 10 Jun 2003",
        "Tue, 10 Jun 2003 04:00:00 GMT extra", "Wed, 10 Jan 2024 14:01:02 BST", "Wed, 10 Jan 2024 14:01:02 IST",
        "Wed, 10 Jan 2024 14:01:02. GMT", "Wed, 10 Jan 2024 14:01.5 GMT", "Wed, 10 Jan 2024 14:01:02 GMT+", "Jan 10 2024",
    ])
    func rfc822Refuses(_ text: String) {
        #expect(FeedDates.rfc822(text) == nil)
    }

    @Test(arguments: [
        ("2003-06-10T04:00:00Z", "2003-06-10T04:00:00Z"),
        ("2003-12-13T08:29:29-04:00", "2003-12-13T12:29:29Z"),
        ("2003-12-13T18:30:02.25+01:00", "2003-12-13T17:30:02Z"),
        ("2003-12-31T23:30Z", "2003-12-31T23:30:00Z"),
        ("2004-01-01T00:30:00+01:00", "2003-12-31T23:30:00Z"),
        ("2003-06-10", "2003-06-10T00:00:00Z"),
        ("2003-06", "2003-06-01T00:00:00Z"),
        ("2003", "2003-01-01T00:00:00Z"),
        ("2003-06-10 04:00:00+0000", "2003-06-10T04:00:00Z"),
        ("2003-06-10t04:00:00z", "2003-06-10T04:00:00Z"),
        ("1969-12-31T23:59:59Z", "1969-12-31T23:59:59Z"),
        ("2400-02-29T00:00:00Z", "2400-02-29T00:00:00Z"),
    ])
    func w3cdtf(_ text: String, _ expected: String) {
        #expect(FeedDates.w3cdtf(text) == expected)
    }

    @Test(arguments: ["03-06-10", "2003-13-01", "2003-02-30", "2003-06-10T04:00:00+25:00", "2003-06-10T04", "2003-06-10T04:00:00Zjunk",
                      "2100-02-29", "2003-06-10T04:00:00.Z"])
    func w3cdtfRefuses(_ text: String) {
        #expect(FeedDates.w3cdtf(text) == nil)
    }

    @Test func anUnreadableDateIsLeftOutNotAnError() throws {
        let p = try XMLFeedReader.read(Array("""
        <rss><channel><item><guid>1</guid><pubDate>sometime last week</pubDate></item>
        <item><guid>2</guid><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate><dc:date xmlns:dc="http://purl.org/dc/elements/1.1/">2001-01-01</dc:date></item>
        </channel></rss>
        """.utf8), charset: nil)
        #expect(p.items.map { $0["date_published"] } == [nil, .string("2003-06-10T04:00:00Z")])
    }
}
