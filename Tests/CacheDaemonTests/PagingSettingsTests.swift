import Testing
@_spi(Harness) @testable import CacheDaemon
import CacheProtocol
import CacheService

/// The paging settings (docs/operations.md, "Configuration"): each kind
/// built from its settings, the combinations refused with the setting
/// named, and the manifest taking the posts' when both are one URL.
@Suite struct PagingSettingsTests {
    func settings(_ args: [String]) throws(SettingsError) -> Settings {
        guard case .run(let s) = try Settings.parse(arguments: ["--config", "/dev/null"] + args, environment: [:]) else {
            throw SettingsError("not run settings")
        }
        return s
    }

    func refusal(_ args: [String]) -> String {
        do { _ = try settings(args); return "" } catch { return error.message }
    }

    @Test func eachKindIsBuiltFromItsSettings() throws {
        let reddit = try settings(["--posts-url", "https://r.test/new.json", "--posts-items", "/data/children", "--posts-item", "/data",
                                   "--posts-paging", "cursor", "--posts-cursor", "/data/after", "--posts-cursor-param", "after"])
        let after = try JSONPointer("/data/after"), data = try JSONPointer("/data")
        #expect(reddit.feedConfiguration.postsShape.paging == .cursor(CursorPaging(source: .pointer(after), parameter: "after")))
        #expect(reddit.feedConfiguration.postsShape.item == data)
        let stripe = try settings(["--posts-paging", "cursor", "--posts-cursor-last", "/id", "--posts-cursor-param", "starting_after",
                                   "--posts-has-more", "/has_more"])
        #expect(stripe.feedConfiguration.postsShape.paging
                == .cursor(CursorPaging(source: .lastItem(.member("id")), parameter: "starting_after", hasMore: .member("has_more"))))
        let header = try settings(["--posts-paging", "cursor", "--posts-cursor", "header:X-Next-Cursor"])
        #expect(header.feedConfiguration.postsShape.paging == .cursor(CursorPaging(source: .header("x-next-cursor"))))
        let contentful = try settings(["--posts-paging", "offset", "--posts-offset-param", "skip", "--posts-page-size", "100", "--posts-total", "/total"])
        #expect(contentful.feedConfiguration.postsShape.paging
                == .offset(OffsetPaging(offsetParameter: "skip", limitParameter: "limit", pageSize: 100, total: .pointer(.member("total")))))
        let algolia = try settings(["--posts-paging", "page", "--posts-page-start", "0", "--posts-total-pages", "/nbPages"])
        #expect(algolia.feedConfiguration.postsShape.paging == .page(PageNumberPaging(parameter: "page", start: 0, totalPages: .pointer(.member("nbPages")))))
        let wordpress = try settings(["--posts-paging", "page", "--posts-page-param", "page", "--posts-total-pages", "header:X-WP-TotalPages"])
        #expect(wordpress.feedConfiguration.postsShape.paging == .page(PageNumberPaging(totalPages: .header("x-wp-totalpages"))))
        let jsonServer = try settings(["--posts-paging", "offset", "--posts-total", "HEADER: X-Total-Count"])
        #expect(jsonServer.feedConfiguration.postsShape.paging == .offset(OffsetPaging(total: .header("x-total-count"))))
        #expect(try settings([]).feedConfiguration.postsShape.paging == .link)
        #expect(try settings(["--posts-keep", "all"]).feedConfiguration.postsKeep == .all)
        #expect(try settings(["--posts-keep", "500"]).feedConfiguration.postsKeep == .newest(500))
    }

    @Test func combinationsThatMakeNoPagingAreRefusedNamingTheSettings() {
        #expect(refusal(["--posts-paging", "cursor"]).contains("posts-paging = cursor needs posts-cursor"))
        #expect(refusal(["--posts-paging", "cursor", "--posts-cursor", "/a", "--posts-cursor-last", "/id"]).contains("set one of posts-cursor and posts-cursor-last"))
        #expect(refusal(["--images-paging", "cursor"]).contains("images-paging = cursor needs images-cursor"))
        #expect(refusal(["--posts-paging", "scroll"]).contains("must be link, cursor, offset or page"))
        #expect(refusal(["--posts-cursor-param", "a&b"]).contains("query parameter name"))
        #expect(refusal(["--posts-page-start", "2"]).contains("posts-page-start"))
        #expect(refusal(["--posts-keep", "0"]).contains("feed, all or a count"))
        #expect(refusal(["--posts-cursor", "/after"]).contains("posts-cursor is set but posts-paging is link: set posts-paging = cursor"))
        #expect(refusal(["--posts-paging", "offset", "--posts-total-pages", "/n"]).contains("posts-total-pages is set but posts-paging is offset"))
        #expect(refusal(["--posts-cursor-param", "p%5B"]).contains("query parameter name"))
        #expect(refusal(["--posts-paging", "cursor", "--posts-cursor", "nope"]).contains("JSON Pointer"))
        #expect(refusal(["--posts-paging", "cursor", "--posts-cursor", "header:"]).contains("header:NAME needs a header name"))
        #expect(refusal(["--posts-paging", "page", "--posts-total-pages", "header:a b"]).contains("posts-total-pages header:NAME needs a header name"))
        #expect(refusal(["--posts-paging", "offset", "--posts-total", "total"]).contains("posts-total"))
    }

    @Test func theManifestTakesThePostsSettingsOnlyWhenItIsTheSameURL() throws {
        let paging = ["--posts-items", "/data/children", "--posts-item", "/data", "--posts-paging", "cursor", "--posts-cursor", "/data/after"]
        let same = try settings(["--posts-url", "https://r.test/new.json", "--images-url", "https://r.test/new.json"] + paging)
        let images = same.feedConfiguration.imagesShape
        let children = try JSONPointer("/data/children"), data = try JSONPointer("/data")
        #expect(images.items == children && images.item == data)
        #expect(images.paging == same.feedConfiguration.postsShape.paging)
        let own = try settings(["--posts-url", "https://r.test/new.json", "--images-url", "https://r.test/images.json"] + paging)
        #expect(own.feedConfiguration.imagesShape.items == nil && own.feedConfiguration.imagesShape.item == nil)
        #expect(own.feedConfiguration.imagesShape.paging == .link)
        // The manifest's own value wins over the posts'.
        let mixed = try settings(["--posts-url", "https://r.test/a", "--images-url", "https://r.test/a", "--images-paging", "link"] + paging)
        #expect(mixed.feedConfiguration.imagesShape.paging == .link)
    }

    /// Issue 33's bounds: images-max-items follows posts-max-items when both
    /// feeds are one URL, and posts-min-free-space is a quarter of
    /// min-free-space unless set.
    @Test func theItemBoundAndThePostsHeadroomTakeTheirDefaults() throws {
        let same = try settings(["--posts-url", "https://r.test/a", "--images-url", "https://r.test/a", "--posts-max-items", "5000"])
        #expect(same.feedConfiguration.postsShape.maxItems == 5000 && same.feedConfiguration.imagesShape.maxItems == 5000)
        let own = try settings(["--posts-url", "https://r.test/a", "--images-url", "https://r.test/b", "--posts-max-items", "5000"])
        #expect(own.feedConfiguration.imagesShape.maxItems == 1_000_000)
        let set = try settings(["--posts-url", "https://r.test/a", "--images-url", "https://r.test/a", "--images-max-items", "7"])
        #expect(set.feedConfiguration.imagesShape.maxItems == 7)
        #expect(try settings(["--min-free-space", "64M"]).feedConfiguration.postsMinFreeSpace == 16 << 20)
        #expect(try settings(["--min-free-space", "0"]).feedConfiguration.postsMinFreeSpace == 0)
        #expect(try settings(["--posts-min-free-space", "1M"]).feedConfiguration.postsMinFreeSpace == 1 << 20)
    }
}
