import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// What refreshing the feeds needs of the store (`Store` is one): each
/// feed's pages as stored, the posts and rows they hold, the two
/// transactions that replace them, and `feeds.state`.
protocol FeedStore: Sendable {
    /// Raised when the daemon stops: a page being parsed gives up (`StopFlag.current`).
    var stopFlag: StopFlag { get }
    /// True once a posts refresh was stored.
    var postsKnown: Bool { get }
    /// True once a manifest refresh was stored.
    var manifestKnown: Bool { get }
    /// The posts feed's pages as stored (`Store.postPages`).
    var postPages: [FeedPage] { get }
    /// The manifest's pages as stored.
    var manifestPages: [FeedPage] { get }
    /// How many posts are stored.
    var postCount: Int { get }
    /// The stored JSON of post `id`.
    func post(id: PostID) -> [UInt8]?
    /// Every post in the feed's order.
    func postsInFeedOrder() -> [(id: PostID, json: [UInt8])]
    /// The posts at `positions` of the feed's order (clamped to it).
    func postsInFeedOrder(_ positions: Range<Int>) -> [(id: PostID, json: [UInt8])]
    /// The first and the last of the first `count` posts of the feed's order.
    func postsAtFeedEnds(of count: Int) -> [(id: PostID, json: [UInt8])]
    /// Replaces every post as one transaction (the last `history` are kept
    /// from before), refused when less than `headroom` bytes would stay free.
    func replacePosts(_ posts: consuming [(id: PostID, json: [UInt8])], pages: [FeedPage], history: Int,
                      headroom: Int64) throws(StoreError) -> PostsChange
    /// Rows from `offset`, at most `limit`: the total and the page.
    func rows(offset: Int, limit: Int) -> (total: Int, page: [Row])
    /// Replaces every row as one transaction; returns how many changed.
    func replaceManifest(_ rows: [(url: String, description: String?)], pages: [FeedPage]) throws(StoreError) -> Int
    /// Reads `feeds.state`.
    func readFeedsState() -> FeedsStateFile
    /// Replaces `feeds.state` durably.
    func writeFeedsState(_ state: FeedsState) throws(StoreError)
}

extension Store: FeedStore {}

/// Feed pages over HTTP (`HTTPClient`, libcurl's multi handle on the fetch
/// thread): each page into memory, bounded by its request, handed on on a
/// worker, where the walk decodes it.
struct HTTPPages: PageFetching {
    let http: HTTPClient
    let onWorker: @Sendable (@escaping @Sendable () -> Void) -> Void

    func fetchPage(_ request: FetchRequest, completion: @escaping @Sendable (Result<(HTTPResponse, PageBody), FetchError>) -> Void) {
        let sink = MemorySink(limit: Int(request.maxBodySize ?? Int64(Int.max)), setting: request.maxBodySetting)
        http.fetch(request, into: sink) { [onWorker] result in
            onWorker { completion(result.map { ($0, PageBody(sink.take(), url: $0.url)) }) }
        }
    }
}
