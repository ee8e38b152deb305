import Testing
import CacheHTTP

/// HTTP dates read in the three forms RFC 9110 (section 5.6.7) names.
@Suite struct HTTPDateTests {
    @Test func httpDatesInTheirThreeForms() {
        let t: Int64 = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example)
        #expect(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 GMT") == t)
        #expect(HTTPDate.seconds("Sunday, 06-Nov-94 08:49:37 GMT") == t)
        #expect(HTTPDate.seconds("Sun Nov  6 08:49:37 1994") == t)
        #expect(HTTPDate.seconds("Thu, 01 Jan 1970 00:00:01 GMT") == 1)
        #expect(HTTPDate.seconds("Tue, 29 Feb 2028 23:59:59 GMT") == 1_835_481_599)
        for bad in ["", "0", "-1", "tomorrow", "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
                    "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994"] {
            #expect(HTTPDate.seconds(bad) == nil, "\(bad)")
        }
    }
}

/// `Cache-Control` read by name (RFC 9111 section 5.2).
@Suite struct CacheControlTests {
    @Test func directivesByNameLowercasedAndUnquoted() {
        #expect(CacheControl.directives("public, MAX-AGE=\"60\", must-revalidate") == ["public": "", "max-age": "60", "must-revalidate": ""])
        #expect(CacheControl.directives("max-age=1, max-age=2")["max-age"] == "1", "the first of a repeated directive counts")
        #expect(CacheControl.directives("=, =5, ,max-age=7") == ["max-age": "7"], "an item without a name is skipped")
        #expect(CacheControl.directives("").isEmpty)
    }

    @Test func deltaSecondsAreDigitsOnly() {
        #expect(CacheControl.deltaSeconds("3600") == 3600)
        #expect(CacheControl.deltaSeconds("99999999999999999999") == Int64(Int32.max))
        for bad in ["", "-1", "1.5", " 1", "ten"] { #expect(CacheControl.deltaSeconds(bad) == nil, "\(bad)") }
    }
}
