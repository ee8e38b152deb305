import CacheSystem

/// One page of a feed as last fetched (docs/storage-format.md, the `page`
/// record). A feed is a list of pages: the first at the configured URL,
/// each naming the next; its items are the pages' items in order.
public struct FeedPage: Sendable, Equatable {
    /// The page's absolute URL as requested; "" when unknown: the one page
    /// a version-1 store's feed validators stand for.
    public var url: String
    /// Its ETag and Last-Modified (sanitized when stored; an ignored ETag,
    /// `Validators.ignoredETag`, is kept).
    public var validators: Validators
    /// The next page's absolute URL as found on this page; nil on the last page.
    public var next: String?
    /// How many items (posts kept, or manifest rows) this page contributed, in feed order.
    public var count: Int

    /// A page; `count` is how many of the feed's items came from it.
    public init(url: String, validators: Validators = Validators(), next: String? = nil, count: Int) {
        self.url = url
        self.validators = validators
        self.next = next
        self.count = count
    }

    /// This page with its validators sanitized (`Validators.sanitized`): what the store keeps.
    var sanitized: FeedPage {
        var p = self
        p.validators = validators.sanitized
        return p
    }

    /// True when a list of pages says no more than a version-1 `validators`
    /// record does: one page, URL unknown (""), no next page. Such a list is
    /// logged as that record, in either format version.
    static func isValidatorsOnly(_ pages: [FeedPage]) -> Bool {
        pages.count == 1 && pages[0].url.isEmpty && pages[0].next == nil
    }
}

/// What the store holds about a feed's pages.
enum StoredPages: Equatable {
    /// A `validators` record only (version 1, or pages that say no more):
    /// one page of unknown URL whose count is every item of the feed.
    case validators(Validators)
    /// The pages of the last paged refresh, in order (`page` records).
    case pages([FeedPage])

    /// The pages, for a feed of `items` items.
    func pages(items: Int) -> [FeedPage] {
        switch self {
        case .validators(let v): [FeedPage(url: "", validators: v, next: nil, count: items)]
        case .pages(let list): list
        }
    }
}

/// The store's total order of post ids: integers ascending, then strings by
/// their UTF-8 bytes. The list order of an all-integer feed, and the order
/// of posts that no order record places.
enum PostOrder {
    /// True when `a` comes before `b`.
    static func precedes(_ a: PostID, _ b: PostID) -> Bool {
        switch (a, b) {
        case let (.int(x), .int(y)): x < y
        case (.int, .string): true
        case (.string, .int): false
        case let (.string(x), .string(y)): x.utf8.lexicographicallyPrecedes(y.utf8)
        }
    }
}
