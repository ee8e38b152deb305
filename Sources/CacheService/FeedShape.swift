import CacheProtocol

/// Where a feed's items are in each page and how to reach the next page
/// (docs/operations.md, "Feeds in the wild"): the `posts-*` or `images-*`
/// settings of one feed.
public struct FeedShape: Sendable, Equatable {
    /// `posts` or `images`: the settings' prefix, for messages (`posts-items`).
    public var prefix: String
    /// The array of items in the document (`posts-items`); nil: the document
    /// itself, or a JSON Feed's `items`.
    public var items: JSONPointer?
    /// The next page's URL in the document (`posts-next`); nil: a JSON
    /// Feed's `next_url`, else none. A `Link` header's `rel="next"` is
    /// followed either way.
    public var next: JSONPointer?
    /// Pages followed at most (`posts-max-pages`); one more that holds
    /// posts fails the refresh (an empty page ending the feed is not one).
    public var maxPages: Int
    /// Items one refresh reads at most, from all its pages together
    /// (`posts-max-items`); more fail the refresh before they are decoded.
    public var maxItems: Int
    /// How the next page is named (`posts-paging` and its settings).
    public var paging: Paging
    /// The object inside each item that is the post or row (`posts-item`:
    /// Reddit's `/data`, Bluesky's `/post`); nil: the item itself.
    public var item: JSONPointer?

    /// 1,000 pages: a 100-per-page API's 100,000 items, far past what one
    /// refresh should ever walk, near enough that a runaway feed stops soon.
    public static let defaultMaxPages = 1000

    /// 1,000,000 items: a million-post feed fits; a hostile feed of tiny
    /// items (16 pages of `{"id":N}` made two million posts) stops there.
    public static let defaultMaxItems = 1_000_000

    public init(prefix: String, items: JSONPointer? = nil, next: JSONPointer? = nil, maxPages: Int = FeedShape.defaultMaxPages,
                paging: Paging = .link, item: JSONPointer? = nil, maxItems: Int = FeedShape.defaultMaxItems) {
        self.prefix = prefix
        self.maxItems = maxItems
        self.items = items
        self.next = next
        self.maxPages = maxPages
        self.paging = paging
        self.item = item
    }

    /// The setting's name for a part of the shape: `posts-items`, `images-next`.
    func setting(_ part: String) -> String { "\(prefix)-\(part)" }
}

/// Which members of each item a feed's entries are read from.
public struct ItemFields: Sendable, Equatable {
    /// The post's id in each post (`posts-id`, default `/id`).
    public var postID: JSONPointer
    /// The image's URL in each manifest item (`images-url-field`, default `/url`).
    public var imageURL: JSONPointer
    /// The image's description (`images-description-field`, default `/description`).
    public var imageDescription: JSONPointer

    public init(postID: JSONPointer = .member("id"), imageURL: JSONPointer = .member("url"),
                imageDescription: JSONPointer = .member("description")) {
        self.postID = postID
        self.imageURL = imageURL
        self.imageDescription = imageDescription
    }

}
