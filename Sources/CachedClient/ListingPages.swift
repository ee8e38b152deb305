import CacheProtocol

/// One page of a listing read page by page: `CachedClient.postPages` and
/// `CachedClient.imagePages`.
public struct ListingPage<Item: Sendable>: Sendable {
    /// The page's posts or rows, in list order.
    public var items: [Item]
    /// The position in the listing of the first of `items`.
    public var offset: Int
    /// The number of posts (or matches of the query) or rows in the whole
    /// listing: the same in every page, or the walk ends with `.changed`.
    public var total: Int
}

/// The pages of a listing (`list_posts`, `list_images`), each read with one
/// request when the iteration asks for it, so a store of any size is listed
/// in the memory of one page (docs/protocol.md, "Client libraries").
///
/// Every page but the last holds `pageSize` items, and none is empty. Pages
/// whose answer would be longer than a client reads (posts of many
/// megabytes, the daemon refusing them with `max_limit`) come smaller.
/// Iterating throws `CachedError` as the calls do, and `.changed` when the
/// listing changed between two pages (a refresh, a delete): its total is
/// not the first page's, or the page does not begin where the last ended
/// (each request after the first starts one item early, at the last one
/// read, to check). The items read until then are as they were; iterating
/// again reads the listing as it is now.
///
/// ```swift
/// for try await page in cached.postPages() {
///     for post in page.items { print(post.id, post.title ?? "") }
/// }
/// ```
public struct ListingPages<Item: Sendable>: AsyncSequence, Sendable {
    public typealias Element = ListingPage<Item>
    public typealias Failure = CachedError

    let client: CachedClient
    let walk: ListingWalk
    /// Members every request carries besides `offset` and `limit` (`query`).
    let fields: [(String, JSON)]
    /// Whether the whole answer must come within the timeout (`list_posts`,
    /// answered from memory) or may take as long as the daemon is alive
    /// (`list_images`, which may fetch the manifest first).
    let quick: Bool
    let items: @Sendable (CachedClient, ListingWalk.Page) throws(CachedError) -> [Item]

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self, walk: walk)
    }

    /// Reads the next page when asked for it.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = CachedError

        let pages: ListingPages
        var walk: ListingWalk
        /// Set once the walk failed: it is not asked again.
        var failed = false

        /// The next page; nil after the last.
        public mutating func next() async throws(CachedError) -> ListingPage<Item>? {
            guard !failed else { return nil }
            do {
                while let request = walk.nextRequest() {
                    let answer = try await pages.client.answer(walk.kind.op, request.fields + pages.fields, quick: pages.quick)
                    guard let page = try walk.take(answer), !page.entries.isEmpty else { continue }
                    return ListingPage(items: try pages.items(pages.client, page), offset: page.offset, total: page.total)
                }
                return nil
            } catch {
                failed = true
                throw error
            }
        }
    }
}

extension CachedClient {
    /// The posts (`posts(offset:limit:query:)`'s, in the same order), read
    /// in pages of `pageSize` (at least 1) as the iteration goes:
    /// `ListingPages`. With a `query`, the posts whose title holds it.
    ///
    /// The default, 999, makes each request after the first 1,000 posts
    /// with the one it repeats: the most the daemon answers at once, from
    /// memory, without waiting for a worker.
    public func postPages(query: String? = nil, pageSize: Int = 999) -> ListingPages<Post> {
        ListingPages(client: self, walk: ListingWalk(.posts, pageSize: pageSize), fields: query.map { [("query", .string($0))] } ?? [],
                     quick: true) { (client, page) throws(CachedError) in
            var posts: [Post] = []
            posts.reserveCapacity(page.entries.count)
            for (i, entry) in page.entries.enumerated() { posts.append(try client.post(entry, key: page.ids.flatMap { i < $0.count ? $0[i] : nil })) }
            return posts
        }
    }

    /// The manifest's rows (`images(offset:limit:)`'s), read in pages of
    /// `pageSize` (at least 1) as the iteration goes: `ListingPages`.
    public func imagePages(pageSize: Int = 999) -> ListingPages<ImageRow> {
        ListingPages(client: self, walk: ListingWalk(.images, pageSize: pageSize), fields: [], quick: false) { (client, page) throws(CachedError) in
            try client.decode([ImageRow].self, .array(page.entries))
        }
    }
}
