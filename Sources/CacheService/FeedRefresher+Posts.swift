import CacheProtocol
import CacheFetch
import CacheStore
import CacheSystem

/// What a posts refresh hands its waiters: the summary, and when the
/// manifest shares the posts' pages (`images-url` = `posts-url`), the
/// manifest's pages decoded from the same answers, for the images prefetch
/// that follows (so each page is fetched once).
struct PostsRefresh: Sendable {
    var summary: PostsSummary
    var manifest: SharedManifest?
}

/// The manifest's pages as a posts refresh walked them, and the manifest's
/// pages as stored when that walk began: they are stored only if the
/// manifest is still that one (no manifest refresh stored a newer one
/// meanwhile).
struct SharedManifest: Sendable {
    var pages: [PageResult<DecodedManifestPage>]
    var base: [FeedPage]
    /// What the last page said of more pages.
    var warning: WalkWarning
    /// The digest of the manifest's settings the pages were decoded with
    /// (a reload during the walk must not record newer ones over them).
    var settings: Hash128
}

/// Both decodings of one page that serves both feeds.
struct SharedPage: Sendable {
    var posts: DecodedPostsPage
    /// A manifest that fails to decode fails only the manifest's refresh
    /// (which then walks the pages itself and says why), never the posts'.
    var manifest: Result<DecodedManifestPage, FeedError>
}

/// The posts' refresh: every page walked, then the whole feed stored as
/// one transaction (docs/protocol.md, "Feeds").
extension FeedRefresher {
    /// Refreshes the posts (joins a refresh already running that does as
    /// much: `ForcibleFlight`).
    func refreshPosts(force: Bool, completion: @escaping @Sendable (Result<PostsRefresh, CacheError>) -> Void) {
        let again: @Sendable () -> Void = { [self] in refreshPosts(force: true, completion: completion) }
        guard postsFlight.join(force: force, waiter: completion, again: again) == .run else { count { $0.coalesced += 1 }; return }
        let config = settings()
        let fetch = FeedFetch(setting: "posts-url", url: config.postsURL, feed: .posts)
        let finish: @Sendable (Result<PostsRefresh, CacheError>) -> Void = { [self] r in postsFlight.finish(r) }
        let stored = store.postPages
        let shape = config.postsShape
        let validators: @Sendable (Validators, HTTPResponse) -> Validators = { [self] sent, response in
            validatorsToStore(.posts, setting: fetch.setting, sent: sent, response: response)
        }
        let keep = config.postsKeep
        let digest = settingsDigest(.posts, config)
        let manifestDigest = settingsDigest(.manifest, config)
        // Pages stored under other settings name other next pages and hold other posts: all asked again.
        let changed = settingsChanged(.posts, digest)
        let force = force || changed
        // The manifest sharing these pages takes them only if its own settings did not change either.
        let manifestChanged = config.feedsSharePages && settingsChanged(.manifest, manifestDigest)
        // A history feed stops at its first page of nothing new, unless it
        // lists oldest first (its new posts are then on its last page). Under
        // changed settings the first page never stops it: the pages after it
        // may never have been read (a cursor just set); any unread page holds
        // posts not stored, so the walk goes on through them.
        let ends = keep == .feed ? [] : store.postsAtFeedEnds(of: stored.reduce(0) { $0 + $1.count })
        let stopEarly = keep != .feed && !Self.listsOldestFirst(ends)
        let firstURL = config.postsURL.map(shape.paging.firstURL)
        let nothingNew: (@Sendable (PageResult<DecodedPostsPage>) -> Bool)? = stopEarly
            ? { @Sendable [self] page in !(changed && page.page.url == firstURL) && holdsNothingNew(page) } : nil
        if config.feedsSharePages {
            let manifestBase = store.manifestPages
            var walk = PageWalk<SharedPage>(fetch: fetch, shape: shape, stored: stored, force: force, decode: { page, type, room throws(FeedError) in
                let body = page.take()
                let url = page.url
                // The manifest first: then the posts' decode is the body's last
                // reader, and gives its pages back as it goes. A page the posts
                // refuse fails the walk whatever the manifest made of it.
                let m = Result { () throws(FeedError) in
                    try FeedDecoder.manifestPage(body, shape: config.imagesShape, fields: config.fields, contentType: type, room: room, url: url)
                }
                let p = try FeedDecoder.postsPage(consuming: consume body, shape: shape, id: config.fields.postID, contentType: type, room: room, url: url)
                return (SharedPage(posts: p, manifest: m), p.facts)
            }, validatorsToStore: validators)
            if let nothingNew { walk.stopAfter = { nothingNew($0.map(\.posts)) } }
            fetchPages(walk) { [self] result in
                finish(result.flatMap { walked in
                    let posts = WalkResult(pages: walked.pages.map { $0.map(\.posts) }, warning: walked.warning, stoppedEarly: walked.stoppedEarly)
                    // A walk that stopped early did not read the whole manifest: it walks its pages itself.
                    let manifest = walked.stoppedEarly || manifestChanged ? nil : sharedManifest(walked.pages, stored: manifestBase)
                    return postsEdits.withLock { _ in storePosts(posts, keep: keep, settings: digest) }.map { summary in
                        PostsRefresh(summary: summary, manifest: manifest.map {
                            SharedManifest(pages: $0, base: manifestBase, warning: walked.warning, settings: manifestDigest)
                        })
                    }
                })
            }
        } else {
            var walk = PageWalk<DecodedPostsPage>(fetch: fetch, shape: shape, stored: stored, force: force, decode: { page, type, room throws(FeedError) in
                // Taken, not shared: the decoder gives back the body's pages as it copies the posts out.
                let p = try FeedDecoder.postsPage(consuming: page.take(), shape: shape, id: config.fields.postID, contentType: type, room: room, url: page.url)
                return (p, p.facts)
            }, validatorsToStore: validators)
            walk.stopAfter = nothingNew
            fetchPages(walk) { [self] result in
                finish(result.flatMap { walked in postsEdits.withLock { _ in storePosts(walked, keep: keep, settings: digest) }.map { PostsRefresh(summary: $0) } })
            }
        }
    }

    /// True when a page adds nothing to a history feed (`posts-keep` other
    /// than `feed`): it answered 304, or each of its posts is stored with
    /// the same bytes.
    private func holdsNothingNew(_ page: PageResult<DecodedPostsPage>) -> Bool {
        switch page {
        case .unchanged: return true
        case .fresh(_, let decoded): return decoded.posts.allSatisfy { store.post(id: $0.id) == $0.json }
        }
    }

    /// The manifest's view of pages walked for the posts: a page that
    /// answered 304 to the posts' validators is unchanged for the manifest
    /// only when the manifest stored it with the same validators; if not,
    /// nil (the manifest walks its pages itself).
    private func sharedManifest(_ pages: [PageResult<SharedPage>], stored: [FeedPage]) -> [PageResult<DecodedManifestPage>]? {
        var out: [PageResult<DecodedManifestPage>] = []
        for (i, p) in pages.enumerated() {
            switch p {
            case .fresh(let page, let both):
                guard case .success(let m) = both.manifest else { return nil }
                out.append(.fresh(page, m))
            case .unchanged(let page):
                let match = stored.first { $0.url == page.url } ?? (i == 0 ? stored.first { $0.url.isEmpty } : nil)
                guard var m = match, m.validators == page.validators else { return nil }
                m.url = page.url
                out.append(.unchanged(m))
            }
        }
        return out
    }

    /// Stores the posts of every page as one transaction: pages that
    /// answered 304 contribute the posts they contributed last time; a
    /// repeated id keeps its first post; with `keep` other than `feed`,
    /// stored posts the feed no longer lists stay after its own
    /// (`posts-keep`). Writes nothing when every page answered 304.
    private func storePosts(_ walked: WalkResult<DecodedPostsPage>, keep: PostsKeep, settings digest: Hash128) -> Result<PostsSummary, CacheError> {
        let pages = walked.pages
        // Counted, not copied: only the posts kept are read out (pages that
        // answered 304; the history, when one is kept).
        let storedCount = store.postCount
        let storedPages = store.postPages
        let slices = Self.storedSlices(storedPages)
        if pages.allSatisfy({ if case .unchanged = $0 { true } else { false } }) {
            log.info("posts feed not modified (\(pages.count) page\(pages.count == 1 ? "" : "s"), \(storedCount) posts)")
            noteWarning(.posts, walked.warning, settings: digest)
            let kept = storedCount - min(storedCount, storedPages.reduce(0) { $0 + $1.count })
            // `unchanged` counts the feed's own posts; `kept`, the rest.
            return .success(PostsSummary(unchanged: storedCount - kept, kept: kept, warnings: currentWarnings(.posts)))
        }
        // Sized once: a million posts' tables grown by doubling take up to twice the room.
        let listed = pages.reduce(0) { n, p in if case .fresh(_, let d) = p { n + d.count } else { n + p.page.count } }
        var posts: [(id: PostID, json: [UInt8])] = []
        posts.reserveCapacity(listed + (keep == .feed ? 0 : storedCount))
        var newPages: [FeedPage] = []
        var seen = Set<PostID>(minimumCapacity: listed)
        var invalid = 0
        var problems: [String] = []
        var fresh = (posts: 0, notPosts: 0, first: nil as (page: Int, url: String, why: String, count: Int)?)
        for (n, result) in pages.enumerated() {
            var page = result.page
            let before = posts.count
            let label = pages.count == 1 ? "" : "page \(n + 1) "
            let items: [(id: PostID, json: [UInt8])]
            switch result {
            case .unchanged(let p):
                let r = slices[p.url] ?? (n == 0 ? slices[""] : nil) ?? 0..<0
                items = store.postsInFeedOrder(r)
            case .fresh(_, let decoded):
                // Taken: from here this list holds the page's posts alone.
                items = decoded.takePosts()
                fresh.posts += items.count
                fresh.notPosts += decoded.notPosts
                if fresh.first == nil, let why = decoded.firstNotPost { fresh.first = (n, page.url, why, decoded.notPosts) }
                invalid += decoded.invalid
                problems += decoded.problems.prefix(Self.loggedFeedProblems).map { label + $0 }
            }
            for (i, post) in items.enumerated() {
                guard seen.insert(post.id).inserted else {
                    invalid += 1
                    problems.append("\(label)post \(i) repeats id \(post.id.json)")
                    continue
                }
                posts.append(post)
            }
            page.count = posts.count - before
            newPages.append(page)
        }
        for p in problems.prefix(Self.loggedFeedProblems) { log.warning("posts feed: skipped \(p)") }
        if fresh.posts == 0, let first = fresh.first { return .failure(Self.noPosts(first, of: fresh.notPosts, pages: pages.count)) }
        // An oldest-first feed's newest posts are its last (docs/protocol.md, "History").
        let oldestFirst = keep != .feed && Self.listsOldestFirst([posts.first, posts.last].compactMap { $0 })
        let history = keep == .feed ? [] : Self.history(keep, listed: posts.count, stored: store.postsInFeedOrder(),
                                                        storedListed: storedPages.reduce(0) { $0 + $1.count }, seen: seen,
                                                        oldestFirst: oldestFirst)
        posts += history
        // Let go before the store plans the refresh: a million ids are 48 MB of table.
        _ = consume seen
        if keep == .feed {
            Self.forgetLonePageURL(&newPages)
        } else {
            Self.trim(&newPages, &posts, to: keep, oldestFirst: oldestFirst, history: history.count)
        }
        let kept = posts.count - newPages.reduce(0) { $0 + $1.count }
        let change: PostsChange
        let headroom = settings().postsMinFreeSpace
        // Handed over: the store frees each post's copy as its table takes it in.
        do throws(StoreError) { change = try store.replacePosts(consume posts, pages: newPages, history: kept, headroom: headroom) } catch {
            if case .stopped(let what) = error { log.notice(what) }
            return .failure(.store(error, doing: "could not store posts"))
        }
        noteWarning(.posts, walked.warning, settings: digest)
        // The kept posts are copies of stored ones: the store counts them
        // unchanged. The summary counts them once, as kept, so that fetched +
        // unchanged + kept is every post stored.
        let summary = PostsSummary(fetched: change.fetched, unchanged: max(0, change.unchanged - kept), removed: change.removed,
                                   invalid: invalid, kept: kept, warnings: currentWarnings(.posts))
        log.info("posts refreshed from \(pages.count) page\(pages.count == 1 ? "" : "s")\(walked.stoppedEarly ? " (the rest holds nothing new)" : ""): \(summary.fetched) new or changed, \(summary.unchanged) unchanged, \(summary.removed) removed, \(summary.invalid) invalid\(keep == .feed ? "" : ", \(kept) kept from before")")
        return .success(summary)
    }

    /// The failure of a refresh whose fresh pages hold items but not one
    /// post (the API renamed its id, or `posts-id` or `posts-item` does not
    /// fit the feed): stored, it would remove every post those pages listed.
    /// Posts refused for their size alone do not count here.
    static func noPosts(_ first: (page: Int, url: String, why: String, count: Int), of total: Int, pages: Int) -> CacheError {
        let subject = "posts-url" + (pages == 1 ? "" : " page \(first.page + 1)") + " \(first.url.cut(toBytes: 500))"
        let reason = "not one of the \(total) item\(total == 1 ? "" : "s") read is a post that can be kept (here \(first.why)); "
            + "check posts-id and posts-item: the posts were left as they were"
        return .origin(OriginFailure(subject: subject, url: first.url, attempts: 1, reason: reason))
    }

    /// A feed of one page is stored as version 1 stored it: validators with
    /// no URL (the page is the feed's URL), so a store of such feeds keeps
    /// format version 1 and an older cached can still open it
    /// (docs/storage-format.md, "Format evolution").
    static func forgetLonePageURL(_ pages: inout [FeedPage]) {
        if pages.count == 1, pages[0].next == nil { pages[0].url = "" }
    }

    /// A feed with thousands of bad entries logs the first 20: enough to see
    /// the pattern, not enough to flood the journal.
    static let loggedFeedProblems = 20
}

extension PageResult {
    /// The same page with its decoded part transformed.
    func map<T: Sendable>(_ f: (Decoded) -> T) -> PageResult<T> {
        switch self {
        case .unchanged(let p): .unchanged(p)
        case .fresh(let p, let d): .fresh(p, f(d))
        }
    }
}
