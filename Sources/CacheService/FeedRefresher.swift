import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// Refreshes the two feeds, the posts and the image manifest
/// (docs/architecture.md, "The service's components"): each walk over a
/// feed's pages, what is stored of it as one transaction, and what lasts
/// between refreshes. It owns the single flight of each feed, what
/// revalidation may send (`FeedRevalidation`), each feed's stored walk
/// (`feeds.state`: its settings' digest and its "has more" warning), and
/// the lock every edit of the posts takes (a refresh's store, a
/// `delete_post`). It reaches the store through `FeedStore` and the
/// network through `PageFetching`, so it is tested alone
/// (`FeedRefresherTests`).
final class FeedRefresher: Sendable {
    let store: any FeedStore
    let pages: any PageFetching
    let log: Logger
    let onWorker: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// The feed settings now (a reload changes them, through `apply`).
    let settings: @Sendable () -> FeedConfiguration
    /// The configured credentials as their digest shows them (names, never values): a reload changes them.
    let credentials: @Sendable () -> String
    /// Counts into the service's counters.
    let count: @Sendable (@Sendable (inout CounterValues) -> Void) -> Void
    /// Called once a large walk let go of its memory (the heap is trimmed soon after).
    let largeWalkEnded: @Sendable () -> Void

    let postsFlight = ForcibleFlight<Result<PostsRefresh, CacheError>>()
    let manifestFlight = ForcibleFlight<Result<Int, CacheError>>()
    /// What revalidation of each feed may send (FeedRefresher+Validators.swift).
    let revalidation = Locked(FeedRevalidation())
    /// Held while the posts are read and replaced (a refresh's store, a `delete_post`).
    let postsEdits = Locked((), rank: .postsEdit)
    /// Held while `feeds.state` is brought up to date and written.
    let feedsStateWrites = Locked((), rank: .feedsState)
    /// Each feed's stored walk: its settings' digest and "has more" warning (FeedRefresher+State.swift).
    let warnings = Locked(FeedWarnings())

    /// A refresher; it loads `feeds.state` from the store at once.
    init(store: any FeedStore, pages: any PageFetching, log: Logger,
         onWorker: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
         settings: @escaping @Sendable () -> FeedConfiguration, credentials: @escaping @Sendable () -> String,
         count: @escaping @Sendable (@Sendable (inout CounterValues) -> Void) -> Void,
         largeWalkEnded: @escaping @Sendable () -> Void) {
        self.store = store
        self.pages = pages
        self.log = log
        self.onWorker = onWorker
        self.settings = settings
        self.credentials = credentials
        self.count = count
        self.largeWalkEnded = largeWalkEnded
        loadFeedsState()
    }

    /// Calls `completion` once the posts are known (a refresh has stored
    /// them at least once), fetching them if they never were: the first
    /// read of a feed never fetched fetches it, once (docs/protocol.md,
    /// "list_posts"). Concurrent first reads and a prefetch share one refresh.
    func ensurePosts(_ completion: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        if store.postsKnown { completion(.success(())); return }
        refreshPosts(force: false) { result in completion(result.map { _ in () }) }
    }

    /// Calls `completion` once the manifest is known, fetching it if it never was.
    func ensureManifest(_ completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        if store.manifestKnown { completion(.success(store.rows(offset: 0, limit: 0).total)); return }
        refreshManifest(force: false, completion: completion)
    }

    /// A reload's feed settings `new` (the settings were `old`): marks each
    /// feed whose URL changed, then `commit`s the new settings (whoever
    /// keeps them: `settings` reads them). A marked feed is fetched next
    /// without validators (they belong to the old URL); marked first, so a
    /// refresh that starts in between goes unconditional once, never sends
    /// the old URL's validators to the new one.
    func apply(_ new: FeedConfiguration, was old: FeedConfiguration, commit: () -> Void) {
        revalidation.withLock { r in
            if old.postsURL != new.postsURL { r.urlChanged(.posts) }
            if old.imagesURL != new.imagesURL { r.urlChanged(.manifest) }
        }
        commit()
    }

    /// An origin failure, counted as one.
    func originFailure(_ f: OriginFailure) -> CacheError {
        // A page given up because the daemon stops (`FeedError.stopping`) is
        // not the origin's failure: reported as the store's stop is, uncounted.
        if f.reason == FeedError.stopping.description {
            return .store(.stopped("\(f.subject): \(f.reason)"), doing: "could not refresh the feed")
        }
        count { $0.upstreamErrors += 1 }
        return .origin(f)
    }
}
