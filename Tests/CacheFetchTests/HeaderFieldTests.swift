import Testing
import CacheFetch
import CacheHTTP
import CacheSystem

@Suite struct HeaderFieldTests {
    private func parse(_ s: String) -> HeaderField? { HeaderField.parse(Array(s.utf8)) }

    @Test func theLineEndingIsNeverPartOfTheValue() {
        // What libcurl hands the header callback: one line, CRLF included.
        #expect(parse("ETag: \"abc\"\r\n") == HeaderField(name: "etag", value: "\"abc\""))
        #expect(parse("Last-Modified: Mon, 30 Nov 2026 11:54:36 GMT\r\n")?.value == "Mon, 30 Nov 2026 11:54:36 GMT")
        #expect(parse("ETag: W/\"x\"\n")?.value == "W/\"x\"")
        #expect(parse("ETag: \"x\"")?.value == "\"x\"")
        #expect(parse("ETag: \"x\"\r\n")?.value.utf8.last == UInt8(ascii: "\""))
    }

    @Test func spacesAndTabsAroundTheValueAreTrimmed() {
        #expect(parse("Content-Type: \t image/png \t\r\n")?.value == "image/png")
        #expect(parse("X-Empty:\r\n") == HeaderField(name: "x-empty", value: ""))
        #expect(parse("X-Inner: a \t b\r\n")?.value == "a \t b")
    }

    @Test func namesAreLowercasedTokens() {
        #expect(parse("CONTENT-TYPE: text/plain\r\n")?.name == "content-type")
        #expect(parse(": no name\r\n") == nil)
        #expect(parse("Bad Name: x\r\n") == nil)
        #expect(parse(" folded continuation\r\n") == nil)
        #expect(parse("\r\n") == nil)
        #expect(parse("HTTP/1.1 200 OK\r\n") == nil)
    }

    @Test func aValueWithAControlCharacterIsNeverKept() {
        #expect(parse("ETag: \"a\rb\"\r\n") == nil)
        #expect(parse("ETag: \"a\nb\"\r\n") == nil)
        #expect(parse("ETag: \"a\u{0}b\"\r\n") == nil)
        #expect(parse("ETag: \"a\u{7F}\"\r\n") == nil)
        #expect(parse("ETag: \"a\r\r\n") == nil)
    }

    @Test func safeFieldValues() {
        #expect(HTTPGrammar.isFieldValue("\"abc\""))
        #expect(HTTPGrammar.isFieldValue("Mon, 30 Nov 2026 11:54:36 GMT"))
        #expect(HTTPGrammar.isFieldValue("caf\u{E9}"))
        #expect(!HTTPGrammar.isFieldValue("\"abc\"\r\n"))
        #expect(!HTTPGrammar.isFieldValue("\"abc\" "))
        #expect(!HTTPGrammar.isFieldValue("\tabc"))
        #expect(!HTTPGrammar.isFieldValue("a\u{0}"))
    }
}
