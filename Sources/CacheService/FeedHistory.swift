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
    /// (whose ids are `seen`): those it no longer lists, newest first by
    /// `date_published` where they have one (`byDate`), else in the order
    /// they had. `stored` is the feed order as stored: the `storedListed`
    /// posts the feed listed last time, then the history kept before.
    static func history(_ keep: PostsKeep, listed: Int, stored: [(id: PostID, json: [UInt8])], storedListed: Int,
                        seen: Set<PostID>) -> [(id: PostID, json: [UInt8])] {
        if keep == .feed { return [] }
        let split = min(max(0, storedListed), stored.count)
        let out = byDate(displaced: stored[..<split].filter { !seen.contains($0.id) }, older: stored[split...].filter { !seen.contains($0.id) })
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

/// Each feed's stored walk: the digest of the settings its pages were
/// walked with and its last page's "has more" warning (docs/protocol.md,
/// "Never a silent first page"), as `feeds.state` holds them.
struct FeedWarnings: Sendable {
    var state = FeedsState()
}

extension CacheService {
    /// The digest of the settings that decide what a feed's stored pages
    /// hold and name as next: its URL, where its items are, how it pages,
    /// which members are read. A refresh under another digest asks every
    /// page without validators (`FeedsState`).
    static func settingsDigest(_ feed: Feed, _ c: FeedConfiguration, credentials: String) -> Hash128 {
        let shape = feed == .posts ? c.postsShape : c.imagesShape
        var parts = [feed == .posts ? "posts" : "manifest", (feed == .posts ? c.postsURL : c.imagesURL) ?? "-",
                     shape.items?.description ?? "-", shape.next?.description ?? "-", shape.item?.description ?? "-", shape.paging.canonical]
        parts += feed == .posts ? [c.fields.postID.description, c.postsKeep.name] : [c.fields.imageURL.description, c.fields.imageDescription.description]
        parts.append(credentials)
        return Hash128(of: Array(parts.joined(separator: "\n").utf8))
    }

    /// The digest of `feed`'s settings now: the configuration's, and the
    /// names (never the values) of the headers configured for the feeds'
    /// origins, which change what an origin answers.
    func settingsDigest(_ feed: Feed, _ c: FeedConfiguration) -> Hash128 {
        Self.settingsDigest(feed, c, credentials: http.credentials.description)
    }

    /// True when `feed`'s stored pages were walked under other settings than
    /// `digest` (or under settings not recorded: a store from before they
    /// were): the refresh then asks every page without validators.
    func settingsChanged(_ feed: Feed, _ digest: Hash128) -> Bool {
        let known = feed == .posts ? store.postsKnown : store.manifestKnown
        guard known else { return false }
        let changed = warnings.withLock { $0.state.entries[feed].map { $0.settings != digest } ?? true }
        if changed {
            log.info("\(feed == .posts ? "posts" : "manifest") settings differ from those its stored pages were walked with: every page is asked without validators")
        }
        return changed
    }

    /// Loads `feeds.state` at start; a damaged one is said and replaced at the next refresh.
    func loadFeedsState() {
        switch store.readFeedsState() {
        case .absent: break
        case .found(let state): warnings.withLock { $0.state = state }
        case .damaged(let why): log.warning("\(why): taken as absent, so each feed's next refresh asks every page without validators")
        }
    }

    /// Records what a walk under settings `digest` found on its last page:
    /// a new warning, none, or (a 304) the one before standing; writes
    /// `feeds.state` when that changed. A standing warning is logged at every refresh.
    func noteWarning(_ feed: Feed, _ warning: WalkWarning, settings digest: Hash128) {
        // One writer at a time, so the file never goes back to an older state.
        feedsStateWrites.withLock { _ in
            let (standing, changed): (String?, FeedsState?) = warnings.withLock { w in
                let before = w.state
                var entry = w.state.entries[feed] ?? FeedsState.Entry(settings: digest)
                entry.settings = digest
                switch warning {
                case .none: entry.warning = nil
                case .more: entry.warning = warning.text(feed: feed == .posts ? "posts" : "images").map(FeedsState.clean)
                case .asBefore: break
                }
                w.state.entries[feed] = entry
                return (entry.warning, w.state == before ? nil : w.state)
            }
            if let standing { log.warning("\(standing) (the refresh kept what it read)") }
            guard let changed else { return }
            do throws(StoreError) { try store.writeFeedsState(changed) } catch {
                log.warning("could not write feeds.state (\(error)): after a restart each feed's next refresh asks every page without validators")
            }
        }
    }

    /// The warning standing for `feed`, as a list (empty or one): none when
    /// the settings changed since it was found (they may be what it asked for).
    func currentWarnings(_ feed: Feed) -> [String] {
        let digest = settingsDigest(feed, feeds.withLock { $0 })
        return warnings.withLock { w in w.state.entries[feed].flatMap { $0.settings == digest ? $0.warning : nil } }.map { [$0] } ?? []
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
