import CacheProtocol
import CacheFetch
import CacheStore
import CacheSystem
import CacheVariant

/// The one service API every front-end calls (the socket's JSON lines
/// today, HTTP next): posts, images, objects, prefetch and maintenance over
/// the store and the origin. Front-ends never touch the store, the HTTP
/// client, the worker pool or the counters; they translate requests into
/// these calls and `Result`s into answers.
///
/// Each operation answers `.now` when the answer is at hand (a hit; safe on
/// an event loop: memory and at most one `fstatat` or non-blocking read)
/// and `.later` when it needs the disk or the origin (docs/architecture.md,
/// "The read path"). Completions run on worker or fetch threads.
public final class CacheService: Sendable {
    let store: Store
    let http: HTTPClient
    let pool: WorkerPool
    /// Commits finished image downloads (`ServiceConfiguration.commitThreads`).
    let commits: WorkerPool
    let log: Logger
    let counters: Locked<CounterValues>
    /// The feed settings a reload may change.
    let feeds: Locked<FeedConfiguration>
    let maxBytes: Int64
    let started = Clock.monotonicNanoseconds()

    /// Objects quarantined and being downloaded again (`repair`): nil when
    /// it came back, else why not.
    let repairFlight: SingleFlight<Hash128, String?>
    /// Downloads and revalidates images, once per URL, and remembers their failures (ImageFetcher.swift).
    let imageFetcher: ImageFetcher
    /// The last prefetch that finished, for `status`.
    let lastPrefetch = Locked<LastPrefetch?>(nil)
    /// The manifest's URLs resolved, rebuilt when the manifest changes.
    let manifestViews = Locked<ManifestView?>(nil)
    /// Held while the view is rebuilt, so one thread rebuilds it (ManifestView.swift).
    let manifestRebuild = Locked((), rank: .manifestView)
    /// The running prefetches, by arguments: who waits for each and hears its progress (CacheService+Prefetch.swift).
    let prefetchFlight = UpdatingFlight<String, Progress, Result<PrefetchReport, CacheError>>()
    /// Closures behind a lock are kept in a `Handler` (Handler.swift says why).
    let prefetchFinished = Locked<Handler<Void>?>(nil)
    let eventObserver = Locked<Handler<ServiceEvent>?>(nil)
    /// Set when `shutdown` begins: the access-time thread stops.
    let stopping = Locked(false)
    /// Set when large work (a feed walk) freed its memory: the access-time
    /// thread gives the heap's free pages back within a second. Not at once:
    /// the worker that finished may still hold the walk's pages.
    let trimWanted: Locked<Bool>
    /// Refreshes the feeds and owns what lasts between refreshes: their
    /// flights, revalidation, `feeds.state`, the posts' edit lock (FeedRefresher.swift).
    let refresher: FeedRefresher
    /// The scrub: its thread, settings and progress (ScrubRunner.swift).
    let scrub: ScrubRunner
    /// Makes variants and owns all their state: the helpers, the settings,
    /// the flights, the remembered failures (VariantMaker.swift).
    let variants: VariantMaker

    /// A service over an open store (`open` opens one from a configuration).
    init(store: Store, http: HTTPClient, pool: WorkerPool, commits: WorkerPool, log: Logger, configuration: ServiceConfiguration) {
        self.store = store
        self.http = http
        self.pool = pool
        self.commits = commits
        self.log = log
        let feeds = Locked(configuration.feeds), counters = Locked(CounterValues())
        self.feeds = feeds
        self.counters = counters
        self.maxBytes = configuration.maxBytes
        let repairs = SingleFlight<Hash128, String?>()
        repairFlight = repairs
        scrub = ScrubRunner(configuration.scrub, store: store, log: log) { hash, back in
            Self.awaitRepair(hash, repairs, store, then: back)
        }
        let onWorker: @Sendable (@escaping WorkerPool.Job) -> Void = { pool.submit($0) }
        let count: @Sendable (@Sendable (inout CounterValues) -> Void) -> Void = { change in counters.withLock { change(&$0) } }
        let bounds: @Sendable () -> (maxObjectSize: Int64, minFreeSpace: Int64) = { feeds.withLock { ($0.maxObjectSize, $0.minFreeSpace) } }
        imageFetcher = ImageFetcher(store: store, transfers: http, log: log, onWorker: onWorker, onCommit: { commits.submit($0) },
                                    bounds: bounds, count: count)
        variants = VariantMaker(
            store: store, runner: configuration.variantPool.map { VariantHelpers($0, log: log) }, settings: configuration.variants,
            log: log, onWorker: onWorker, bounds: bounds,
            unreadable: { path, error in Self.readFailed(store, pool, path: path, file: nil, error) }, count: count)
        let trim = Locked(false)
        trimWanted = trim
        refresher = FeedRefresher(store: store, pages: HTTPPages(http: http, onWorker: onWorker), log: log, onWorker: onWorker,
                                  settings: { feeds.withLock { $0 } }, credentials: { http.credentials.description }, count: count,
                                  largeWalkEnded: { trim.withLock { $0 = true } })
    }

    // MARK: Counting for front-ends

    /// Counts requests a front-end parsed, and how many it answered with an error.
    public func noteRequests(_ count: Int, errors: Int) {
        counters.withLock { $0.requests += count; $0.errors += errors }
    }

    /// Runs `job` on a worker (a front-end's work too large for its own
    /// thread: a granted listing's answer).
    public func onWorker(_ job: @escaping WorkerPool.Job) {
        pool.submit(job)
    }

    /// Counts a connection opened (`true`) or closed.
    public func noteConnection(opened: Bool) {
        counters.withLock { $0.connections += opened ? 1 : -1 }
    }

    // MARK: Events

    /// Called with every `ServiceEvent`, on the thread where it happens.
    public var onEvent: (@Sendable (ServiceEvent) -> Void)? {
        get {
            guard let handler = eventObserver.withLock({ $0 }) else { return nil }
            return { handler($0) }
        }
        set { eventObserver.withLock { $0 = newValue.map(Handler.init) } }
    }

    func emit(_ event: ServiceEvent) {
        eventObserver.withLock { $0 }?(event)
    }

    // MARK: Status

    /// `status`: what the store holds and the counters (always now).
    public func status() -> ServiceStatus {
        let s = store.stats()
        var status = ServiceStatus(posts: s.posts, images: s.rows, imagesCached: s.rowsCached, objects: s.objects,
                             bytes: s.bytes, maxBytes: maxBytes,
                             uptimeSeconds: UInt64(Clock.elapsed(since: started).wholeSeconds),
                             counters: counterValues(), evictions: s.evictions,
                             storeDirectory: store.directory, logRecords: s.logRecords,
                             lastPrefetch: lastPrefetch.withLock { $0 },
                             verifyReads: store.readVerification.mode.rawValue, variants: s.variants,
                             scrub: scrub.status())
        status.feedWarnings = refresher.feedWarnings()
        return status
    }

    /// The counters, with the store's own (read errors) filled in.
    func counterValues() -> CounterValues {
        var all = counters.withLock { $0 }
        all.readErrors = store.readErrors
        return all
    }

    // MARK: Posts

    /// `get_post`: the stored JSON of post `id` (always now). An id of
    /// either kind also finds the other kind's id of the same spelling when
    /// its own kind has none: `5` finds the string id "5" and "5" finds the
    /// integer 5 (docs/protocol.md, "Post ids"), so a client that cannot
    /// tell (a shell, a URL) needs no type.
    public func post(id: PostID) -> Result<StoredPost, CacheError> {
        var kept = id
        let json = withPost(id: id) { found, bytes in
            kept = found
            return Array(bytes)
        }
        return json.map { .success(StoredPost(id: kept, json: $0)) } ?? .failure(postNotFound(id))
    }

    /// `post(id:)` lending the post's bytes to `body` instead of copying
    /// them (`get_post`'s hot path writes its answer from them): `body`
    /// gets the id the post is kept by and its bytes, under the store's
    /// lock, and makes the bytes it returns (the answer line); nil when no
    /// post has the id in either spelling (`postNotFound` says so).
    ///
    /// Neither generic nor a `Result`: called from another module once a
    /// request, a generic function here looked up its types' metadata at
    /// run time on every call, and a `Result` carrying a `CacheError` is
    /// 137 bytes, copied three times on its way to the answer
    /// (docs/performance.md, "Requests").
    public func withPost(id: PostID, _ body: (PostID, UnsafeRawBufferPointer) -> [UInt8]) -> [UInt8]? {
        if let r = store.withPost(id: id, { body(id, $0) }) { return r }
        if let other = id.otherSpelling, let r = store.withPost(id: other, { body(other, $0) }) { return r }
        return nil
    }

    /// Why `get_post` of `id` found nothing.
    public func postNotFound(_ id: PostID) -> CacheError {
        let hint = store.postsKnown ? "" : " (posts were never fetched: run cachectl prefetch posts)"
        return .notFound("post \(id.json) not found\(hint)")
    }

    /// `list_posts` as front-ends call it: now for a page of at most
    /// `inlineListLimit` posts, later (built on a worker) for a larger one,
    /// or once the posts are fetched when they never were (`ensurePosts`).
    /// With a `query`, only the posts whose title holds it (`PostSearch`):
    /// a scan of every title, so always on a worker.
    public func posts(offset: Int, limit: Int?, query: String? = nil,
                      then completion: @escaping Completion<PostsPage>) -> Outcome<PostsPage> {
        guard store.postsKnown else {
            refresher.ensurePosts { [self] result in completion(result.map { posts(offset: offset, limit: limit, query: query) }) }
            return .later
        }
        let total = store.posts(offset: 0, limit: 0).total
        // A search scans every title, whose length the feed decides (1,000
        // titles of 16 KiB took seconds): never on the event loop.
        guard query == nil else {
            pool.submit { [self] in completion(.success(posts(offset: offset, limit: limit, query: query))) }
            return .later
        }
        guard Self.pageSize(total: total, offset: offset, limit: limit) > Self.inlineListLimit else {
            return .now(.success(posts(offset: offset, limit: limit, query: query)))
        }
        pool.submit { [self] in completion(.success(posts(offset: offset, limit: limit, query: query))) }
        return .later
    }

    /// Listings of more entries than this are built on a worker: a client
    /// listing 1,000,000 posts (300 MB) or 100,000 rows (half a second)
    /// must not hold up the requests of every other client meanwhile.
    public static let inlineListLimit = 1000

    /// How many entries a page from `offset`, at most `limit`, of `total` holds.
    static func pageSize(total: Int, offset: Int, limit: Int?) -> Int {
        max(0, min(total - min(max(offset, 0), total), limit ?? Int.max))
    }

    /// `list_posts`: posts in list order (ascending ids when all are
    /// integers, else the feed's) from `offset`, at most `limit`; with a
    /// `query`, of the posts whose title holds it, and `total` counts those
    /// (always now).
    public func posts(offset: Int, limit: Int?, query: String? = nil) -> PostsPage {
        guard let query else {
            let p = store.postsPage(offset: offset, limit: limit ?? Int.max)
            return PostsPage(total: p.total, ids: p.ids, posts: p.bodies)
        }
        let p = store.searchPostsPage(PostSearch(query).needle, offset: offset, limit: limit ?? Int.max)
        return PostsPage(total: p.total, ids: p.ids, posts: p.bodies)
    }

    /// `delete_post`: removes one post from the store (docs/protocol.md,
    /// "History"); the id finds the other spelling as `get_post`'s does.
    /// Succeeds with the id of the post removed.
    public func deletePost(id: PostID, then completion: @escaping Completion<PostID>) {
        refresher.deletePost(id: id, then: completion)
    }

    // MARK: Reload

    /// New `scrub-interval` and `scrub-rate` (a reload): taken at once.
    public func apply(_ settings: ScrubSettings) { scrub.apply(settings) }

    /// Applies reloaded feed settings. A feed whose URL changed is fetched
    /// next without validators (they belong to the old URL).
    public func apply(_ new: FeedConfiguration) {
        // Only the loop thread applies a reload.
        refresher.apply(new, was: feeds.withLock { $0 }) { [feeds] in feeds.withLock { $0 = new } }
    }
}
