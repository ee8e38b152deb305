import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import CacheHTTP

@Suite struct HTTPRangeTests {
    @Test(arguments: [
        ("bytes=0-9", HTTPRange.part(start: 0, length: 10)),
        ("bytes=90-", .part(start: 90, length: 10)),
        ("bytes=90-1000", .part(start: 90, length: 10)),
        ("bytes=-10", .part(start: 90, length: 10)),
        ("bytes=-1000", .part(start: 0, length: 100)),
        ("BYTES=5-5", .part(start: 5, length: 1)),
        ("bytes=100-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=0-1,5-6", .whole),   // several ranges: the whole
        ("items=0-1", .whole),       // another unit
        ("bytes=5-1", .whole),       // cannot be parsed
        ("bytes=a-b", .whole),
        ("bytes=-", .whole),
        ("bytes=", .whole),
        // Numbers of any length saturate: past any size, not unreadable.
        ("bytes=99999999999999999999-", .unsatisfiable),
        ("bytes=9223372036854775807-", .unsatisfiable),
        ("bytes=99999999999999999999-99999999999999999999", .unsatisfiable),
        ("bytes=-99999999999999999999", .part(start: 0, length: 100)),
        ("bytes=0000000000000000000000005-0000000000000000000000009", .part(start: 5, length: 5)),
        ("bytes=10-99999999999999999999", .part(start: 10, length: 90)),  // an end past any size: clamped
    ])
    func resolvesAgainstAHundredBytes(_ header: String, _ expected: HTTPRange) {
        #expect(HTTPRange.resolve(header, size: 100) == expected)
    }

    @Test func noHeaderIsTheWholeAndAnEmptyObjectHasNoRange() {
        #expect(HTTPRange.resolve(nil, size: 100) == .whole)
        #expect(HTTPRange.resolve("bytes=0-", size: 0) == .unsatisfiable)
        #expect(HTTPRange.resolve("bytes=-5", size: 0) == .unsatisfiable)
    }

    @Test func ifNoneMatchComparesWeaklyAndTakesLists() {
        let tag = "\"abc\""
        #expect(HTTPConditional.noneMatch("\"abc\"", etag: tag))
        #expect(HTTPConditional.noneMatch("W/\"abc\"", etag: tag))
        #expect(HTTPConditional.noneMatch("\"x\", \"abc\"", etag: tag))
        #expect(HTTPConditional.noneMatch("*", etag: tag))
        #expect(!HTTPConditional.noneMatch("\"abcd\"", etag: tag))
        #expect(!HTTPConditional.noneMatch("abc", etag: tag))
        #expect(!HTTPConditional.noneMatch(nil, etag: tag))
    }

    @Test func ifRangeComparesStrongly() {
        #expect(HTTPConditional.rangeApplies(ifRange: nil, etag: "\"a\""))
        #expect(HTTPConditional.rangeApplies(ifRange: "\"a\"", etag: "\"a\""))
        #expect(!HTTPConditional.rangeApplies(ifRange: "W/\"a\"", etag: "\"a\""))
        #expect(!HTTPConditional.rangeApplies(ifRange: "Tue, 01 Dec 2026 14:49:52 GMT", etag: "\"a\""))
    }

    @Test func headsAreBuiltAsWritten() {
        var h = HTTPHead(.partialContent)
        h.field("Content-Length", 10)
        h.field("Content-Range", "bytes 0-9/100")
        h.field("Date", raw: Array("x".utf8))
        #expect(h.finish(body: Array("0123456789".utf8)) ==
            Array("HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 0-9/100\r\nDate: x\r\n\r\n0123456789".utf8))
        var n = HTTPHead(.ok)
        n.field("A", -1_234_567_890_123)
        n.field("B", 0)
        #expect(String(decoding: n.finish(), as: UTF8.self) == "HTTP/1.1 200 OK\r\nA: -1234567890123\r\nB: 0\r\n\r\n")
    }

    @Test func theDateIsAnIMFFixdate() {
        var d = HTTPDate()
        let text = String(decoding: d.now(), as: UTF8.self)
        #expect(text.utf8.count == 29 && text.hasSuffix(" GMT"), "\(text)")
        var t = tm()
        t.tm_wday = 2; t.tm_mday = 1; t.tm_mon = 11; t.tm_year = 126; t.tm_hour = 14; t.tm_min = 9; t.tm_sec = 5
        #expect(HTTPDate.format(t) == "Tue, 01 Dec 2026 14:09:05 GMT")
    }
}
