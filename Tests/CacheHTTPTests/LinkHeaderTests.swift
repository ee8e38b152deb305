import Testing
import CacheHTTP

@Suite struct LinkHeaderTests {
    @Test func githubsLinkHeaderGivesItsNextPage() {
        let v = #"<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last""#
        #expect(LinkHeader.next(v) == "https://api.github.com/repositories/1/issues?page=2")
    }

    @Test func relationsAreCaseInsensitiveListsAndTheFirstRelCounts() {
        #expect(LinkHeader.next(#"<a>; rel="prev", <b>; REL="Next start""#) == "b")
        #expect(LinkHeader.next("<a>; rel=next") == "a")
        #expect(LinkHeader.next(#"<a>; rel="prev"; rel="next""#) == nil)
        #expect(LinkHeader.next(#"<a>; rel="nextpage""#) == nil)
    }

    /// Not RFC 8288's grammar, but servers write it and clients read it:
    /// read as a token, `'next'` was no `next`, and the walk ended at page 1
    /// without a word.
    @Test func singleQuotedRelationsAreRead() {
        #expect(LinkHeader.next("<https://h/2>; rel='next'") == "https://h/2")
        #expect(LinkHeader.next("<https://h/1>; rel='prev first', <https://h/3>; rel='next'") == "https://h/3")
        #expect(LinkHeader.links("<a>; rel='next'; title='x'") == [LinkHeader.Link(target: "a", relations: ["next"])])
        #expect(LinkHeader.next("<a>; rel='next") == nil, "an unterminated quote is malformed")
    }

    @Test func commasInsideTargetsAndQuotesDoNotSplitLinks() {
        let v = #"<https://h/x?a=1,2>; title="a, b"; rel="next", <https://h/y>; rel="last""#
        #expect(LinkHeader.links(v) == [LinkHeader.Link(target: "https://h/x?a=1,2", relations: ["next"]),
                                        LinkHeader.Link(target: "https://h/y", relations: ["last"])])
    }

    @Test func malformedLinksAreSkippedNotFatal() {
        #expect(LinkHeader.next(#"garbage, <https://h/n>; rel="next""#) == "https://h/n")
        #expect(LinkHeader.next("<unterminated; rel=next") == nil)
        #expect(LinkHeader.next(#"<https://h/a>; rel="next"#) == nil)
        #expect(LinkHeader.next("") == nil)
    }

    /// Mastodon's form: relative-free, with max_id.
    @Test func mastodonsLinkHeader() {
        let v = #"<https://m.example/api/v1/timelines/public?max_id=109>; rel="next", <https://m.example/api/v1/timelines/public?min_id=120>; rel="prev""#
        #expect(LinkHeader.next(v) == "https://m.example/api/v1/timelines/public?max_id=109")
    }
}
