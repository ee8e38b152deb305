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

extension CacheService {
    /// The stored posts a history feed keeps after the feed's own `listed`
    /// (whose ids are `seen`): those it no longer lists, in the order they
    /// had (so newest first for a feed that lists newest first).
    static func history(_ keep: PostsKeep, listed: Int, stored: [(id: PostID, json: [UInt8])], seen: Set<PostID>) -> [(id: PostID, json: [UInt8])] {
        switch keep {
        case .feed: return []
        case .all: return stored.filter { !seen.contains($0.id) }
        case .newest(let n):
            let room = n - listed
            guard room > 0 else { return [] }
            var out: [(id: PostID, json: [UInt8])] = []
            for post in stored where !seen.contains(post.id) {
                out.append(post)
                if out.count == room { break }
            }
            return out
        }
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
    /// first N: the later pages' counts shrink to what is kept of them.
    static func trim(_ pages: inout [FeedPage], _ posts: inout [(id: PostID, json: [UInt8])], to keep: PostsKeep) {
        guard case .newest(let n) = keep, posts.count > n else { return }
        posts.removeLast(posts.count - n)
        var budget = n
        for i in pages.indices {
            let c = min(pages[i].count, budget)
            pages[i].count = c
            budget -= c
        }
    }
}

/// The "has more" warning each feed's last refresh ended with
/// (docs/protocol.md, "Never a silent first page").
struct FeedWarnings: Sendable {
    var byFeed: [Feed: String] = [:]
}

extension CacheService {
    /// Records what a walk's last page said: a new warning, none, or (a 304)
    /// the one before standing. A standing warning is logged at every refresh.
    func noteWarning(_ feed: Feed, _ warning: WalkWarning) {
        let standing: String? = warnings.withLock { w in
            switch warning {
            case .none: w.byFeed[feed] = nil
            case .more: w.byFeed[feed] = warning.text(feed: feed == .posts ? "posts" : "images")
            case .asBefore: break
            }
            return w.byFeed[feed]
        }
        if let standing { log.warning("\(standing) (the refresh kept what it read)") }
    }

    /// The warning standing for `feed`, as a list (empty or one).
    func currentWarnings(_ feed: Feed) -> [String] {
        warnings.withLock { $0.byFeed[feed] }.map { [$0] } ?? []
    }

    /// Every standing warning: the posts' first, then the manifest's.
    public func feedWarnings() -> [String] { currentWarnings(.posts) + currentWarnings(.manifest) }
}

extension CacheService {
    /// `delete_post`: removes one post from the store (docs/protocol.md,
    /// "History"); the id finds the other spelling as `get_post`'s does.
    /// Succeeds with the id of the post removed.
    public func deletePost(id: PostID, then completion: @escaping Completion<PostID>) {
        pool.submit { [self] in completion(postsEdits.withLock { _ in removePost(id) }) }
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
        do throws(StoreError) { _ = try store.replacePosts(posts, pages: pages, history: history) }
        catch { return .failure(.store(error, doing: "could not delete post \(id.json)")) }
        log.notice("post \(id.json) deleted by request")
        return .success(id)
    }
}
