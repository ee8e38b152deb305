import CacheProtocol
import CacheStore
import CacheSystem

/// How much of the posts' history a refresh keeps (`posts-keep`;
/// docs/protocol.md, "History").
public enum PostsKeep: Sendable, Equatable {
    /// The store mirrors what the feed lists now (the default).
    case feed
    /// A post once seen stays until it is removed by hand (`delete_post`).
    case all
    /// The newest N: the feed's own posts first, then the kept ones.
    case newest(Int)

    /// The setting's value: `feed`, `all` or the count.
    public var name: String {
        switch self {
        case .feed: "feed"
        case .all: "all"
        case .newest(let n): String(n)
        }
    }
}

extension FeedRefresher {
    /// The stored posts a history feed keeps after the feed's own `listed`
    /// (whose ids are `seen`): those it no longer lists, newest first by
    /// `date_published` where they have one (`byDate`), else in the order
    /// they had. `stored` is the feed order as stored: the `storedListed`
    /// posts the feed listed last time, then the history kept before.
    /// they had: reversed, so newest first, when the feed lists
    /// `oldestFirst`.
    static func history(_ keep: PostsKeep, listed: Int, stored: [(id: PostID, json: [UInt8])], storedListed: Int,
                        seen: Set<PostID>, oldestFirst: Bool = false) -> [(id: PostID, json: [UInt8])] {
        if keep == .feed { return [] }
        let split = min(max(0, storedListed), stored.count)
        var displaced = stored[..<split].filter { !seen.contains($0.id) }
        if oldestFirst { displaced.reverse() }
        let out = byDate(displaced: displaced, older: stored[split...].filter { !seen.contains($0.id) })
        if case .newest(let n) = keep { return Array(out.prefix(max(0, n - listed))) }
        return out
    }

    /// The posts the feed stopped listing merged into the history kept
    /// before (itself in this order already), newest first by
    /// `date_published` (read as UTC); a post without one counts as older
    /// than any that has one, and posts alike keep their order, the ones
    /// just displaced first. Only the displaced posts and the history's
    /// first ones are parsed: the merge stops where the displaced run out.
    static func byDate(displaced: [(id: PostID, json: [UInt8])], older: [(id: PostID, json: [UInt8])]) -> [(id: PostID, json: [UInt8])] {
        func date(_ json: [UInt8]) -> String {
            // A stored post is JSON; one without a readable date sorts last.
            guard let text = (try? JSONParser.parse(json))?["date_published"]?.string else { return "" }
            return FeedDates.w3cdtf(text) ?? ""
        }
        let first = displaced.enumerated().map { (date: date($0.element.json), index: $0.offset, post: $0.element) }
            .sorted { $0.date != $1.date ? $0.date > $1.date : $0.index < $1.index }
        var out: [(id: PostID, json: [UInt8])] = []
        out.reserveCapacity(displaced.count + older.count)
        var i = 0, j = 0
        var olderDate: String?
        while i < first.count, j < older.count {
            let d = olderDate ?? date(older[j].json)
            olderDate = d
            if first[i].date >= d { out.append(first[i].post); i += 1 } else { out.append(older[j]); j += 1; olderDate = nil }
        }
        out += first[i...].map(\.post)
        out += older[j...]
        return out
    }

    /// True when a feed's own posts as stored (feed order) run oldest
    /// first: its first post's id (an integer, or a decimal string as
    /// Mastodon's) is below its last's, or failing ids, its first
    /// `date_published` (RFC 3339, as RSS and Atom entries are stored) is
    /// before its last's.
    static func listsOldestFirst(_ posts: [(id: PostID, json: [UInt8])]) -> Bool {
        guard posts.count >= 2, let first = posts.first, let last = posts.last else { return false }
        func number(_ id: PostID) -> Int64? {
            switch id {
            case .int(let i): i
            case .string(let s): s.utf8.count <= 18 && s.utf8.allSatisfy(ASCII.isDigit) ? Int64(s) : nil
            }
        }
        if let a = number(first.id), let b = number(last.id) { return a < b }
        func date(_ json: [UInt8]) -> String? { (try? JSONParser.parse(json))?["date_published"]?.string }  // a post that is no JSON object has none
        if let a = date(first.json), let b = date(last.json) { return a < b }
        return false
    }

    /// With `newest(N)`, a feed that itself lists more than N keeps its
    /// newest N: its first N, the later pages' counts shrinking to what is
    /// kept of them, or for a feed that lists `oldestFirst` its last N, the
    /// first pages' counts shrinking. `history`: how many of `posts`, at
    /// their end, were kept from before (none are left when the feed's own
    /// fill N).
    static func trim(_ pages: inout [FeedPage], _ posts: inout [(id: PostID, json: [UInt8])], to keep: PostsKeep,
                     oldestFirst: Bool = false, history: Int = 0) {
        guard case .newest(let n) = keep, posts.count > n else { return }
        let own = posts.count - history
        guard oldestFirst, own > n else {
            posts.removeLast(posts.count - n)
            var budget = n
            for i in pages.indices {
                let c = min(pages[i].count, budget)
                pages[i].count = c
                budget -= c
            }
            return
        }
        posts.removeLast(history)
        var drop = own - n
        posts.removeFirst(drop)
        for i in pages.indices where drop > 0 {
            let d = min(pages[i].count, drop)
            pages[i].count -= d
            drop -= d
        }
    }
}

extension FeedRefresher {
    /// `delete_post`: removes one post from the store (docs/protocol.md,
    /// "History"), under the lock every edit of the posts takes; the id
    /// finds the other spelling as `get_post`'s does. Succeeds with the id
    /// of the post removed.
    func deletePost(id: PostID, then completion: @escaping Completion<PostID>) {
        onWorker { [self] in completion(postsEdits.withLock { _ in removePost(id) }) }
    }

    private func removePost(_ asked: PostID) -> Result<PostID, CacheError> {
        let all = store.postsInFeedOrder()
        guard let index = all.firstIndex(where: { $0.id == asked }) ?? asked.otherSpelling.flatMap({ o in all.firstIndex { $0.id == o } }) else {
            return .failure(.notFound("post \(asked.json) not found"))
        }
        let id = all[index].id
        var pages = store.postPages
        var history = all.count - pages.reduce(0) { $0 + $1.count }
        var start = 0
        var inPage = false
        for i in pages.indices {
            if index < start + pages[i].count { pages[i].count -= 1; inPage = true; break }
            start += pages[i].count
        }
        if !inPage { history -= 1 }
        var posts = all
        posts.remove(at: index)
        do throws(StoreError) { _ = try store.replacePosts(posts, pages: pages, history: history, headroom: 0) }
        catch { return .failure(.store(error, doing: "could not delete post \(id.json)")) }
        log.notice("post \(id.json) deleted by request")
        return .success(id)
    }
}
