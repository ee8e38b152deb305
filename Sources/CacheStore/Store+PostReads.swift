import CacheSystem

/// Pages of posts in list order, a title search, and every post in feed
/// order: what listings read. A page's bytes are lent (`PostBodies`), not
/// copied, except where a caller asks for arrays.
extension Store {
    /// Posts in list order: ascending id when every id is an integer,
    /// otherwise the feed's order (that of the last refresh, page after
    /// page). The total and the requested page, each post with its id.
    public func posts(offset: Int, limit: Int) -> (total: Int, page: [(id: PostID, json: [UInt8])]) {
        let p = postsPage(offset: offset, limit: limit)
        return (p.total, zip(p.ids, p.bodies).map { ($0, $1) })
    }

    /// `posts(offset:limit:)` with the posts' bytes lent, not copied (a
    /// listing of 20,000 posts is 20 MB as copies).
    public func postsPage(offset: Int, limit: Int) -> StoredPostsPage {
        state.withLock { s in
            let total = s.listIDs.count
            let start = min(max(offset, 0), total)
            let end = min(total, start + max(0, min(limit, total)))
            return StoredPostsPage(total: total, ids: Array(s.listIDs[start..<end]), bodies: s.posts.bodies(at: s.listSlots[start..<end]))
        }
    }

    /// The posts whose title holds `needle` (lowercased UTF-8; `PostTitle`
    /// says what a title is and how case is ignored), in list order: how
    /// many, and those from `offset`, at most `limit`.
    public func searchPosts(_ needle: [UInt8], offset: Int, limit: Int) -> (total: Int, page: [(id: PostID, json: [UInt8])]) {
        let p = searchPostsPage(needle, offset: offset, limit: limit)
        return (p.total, zip(p.ids, p.bodies).map { ($0, $1) })
    }

    /// `searchPosts` with the posts' bytes lent, not copied. The search
    /// walks a snapshot of the posts without the index's lock (a million
    /// titles take some tens of milliseconds), so it holds up no other
    /// reader; a refresh meanwhile is not in its answer.
    public func searchPostsPage(_ needle: [UInt8], offset: Int, limit: Int) -> StoredPostsPage {
        let (posts, slots) = state.withLock { ($0.posts, $0.listSlots) }
        var total = 0
        var found: [Int32] = []
        let start = max(offset, 0)
        let (sum, overflow) = start.addingReportingOverflow(max(limit, 0))
        let end = overflow ? Int.max : sum
        for slot in slots where posts.title(at: slot, holds: needle) {
            if total >= start && total < end { found.append(slot) }
            total += 1
        }
        return StoredPostsPage(total: total, ids: found.map { posts.id(at: $0) }, bodies: posts.bodies(at: found))
    }

    /// Every post in the feed's order (for a store with no order recorded,
    /// such as a version-1 store: ascending id). Page k of `postPages`
    /// holds the `count` posts after those of the pages before it.
    public func postsInFeedOrder() -> [(id: PostID, json: [UInt8])] { postsInFeedOrder(0..<Int.max) }

    /// The posts at `positions` of the feed's order (clamped to it): a
    /// refresh copies only the posts it keeps (a page that answered 304,
    /// its ends), not the bytes of every post stored (280 MB at a million).
    public func postsInFeedOrder(_ positions: Range<Int>) -> [(id: PostID, json: [UInt8])] {
        state.withLock { s in
            let n = s.feedIDs.count
            let r = min(max(positions.lowerBound, 0), n)..<min(max(positions.upperBound, 0), n)
            return s.feedIDs[r].map { ($0, s.posts[$0]!) }
        }
    }

    /// The first and the last of the first `count` posts of the feed's
    /// order (fewer stored: of those), read together; none when fewer
    /// than two (the oldest-first check's two ends).
    public func postsAtFeedEnds(of count: Int) -> [(id: PostID, json: [UInt8])] {
        state.withLock { s in
            let n = min(count, s.feedIDs.count)
            guard n >= 2 else { return [] }
            return [s.feedIDs[0], s.feedIDs[n - 1]].map { ($0, s.posts[$0]!) }
        }
    }

    /// How many posts are stored.
    public var postCount: Int { state.withLock { $0.posts.count } }
}
