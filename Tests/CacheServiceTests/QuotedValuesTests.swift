import Testing
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem

/// Values an origin chose, quoted into errors, `status` and the log, are
/// cut with a marker (issue 33, point 3: an 8 MiB `next_url` with a refused
/// scheme made an 8,388,702-byte error, an 8 MiB `status` answer and 25 MB
/// of log over three prefetches).
@Suite struct QuotedValuesTests {
    static let huge = "ftp://h.test/" + String(repeating: "a", count: 8 << 20)

    @Test func aFetchErrorQuotesAURLCut() {
        for e in [FetchError.unsupportedScheme(url: Self.huge), .transfer(url: Self.huge, message: "timed out", attempts: 2),
                  .status(url: Self.huge, code: 404, attempts: 1), .rejected(url: Self.huge, reason: "not an image"), .cancelled(url: Self.huge)] {
            #expect(e.description.utf8.count < 1200, "\(e.description.prefix(80))")
            #expect(e.description.contains("... (\(Self.huge.utf8.count - 1024) more bytes)"))
        }
    }

    @Test func anOriginFailureCutsItsSubjectAndReason() {
        let f = OriginFailure(subject: "row 3 " + Self.huge, url: Self.huge, attempts: 0, reason: "refusing " + Self.huge)
        #expect(f.description.utf8.count < OriginFailure.quotedSubject + OriginFailure.quotedReason + 100)
        #expect(f.description.hasPrefix("row 3 ftp://h.test/aaa") && f.description.contains("more bytes): refusing ftp://"))
        let e = CacheError.origin(f)
        #expect(e.description.utf8.count < 3200 && e.reason.utf8.count < 2100)
        let store = CacheError.store(.invalidFeed("x"), doing: "row 3 " + Self.huge)
        #expect(store.description.utf8.count < 1200, "\(store.description.prefix(80))")
        // Short values are quoted whole.
        #expect(OriginFailure(subject: "posts-url https://a.test/", url: "", reason: "404").description == "posts-url https://a.test/: 404")
    }
}
