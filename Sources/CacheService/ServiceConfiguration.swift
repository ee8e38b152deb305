import CacheFetch
import CacheStore
import CacheVariant

/// What the service needs from the settings; built from them in one place
/// (`Settings.serviceConfiguration`, CacheDaemon).
public struct ServiceConfiguration: Sendable, Equatable {
    /// The feeds, which a reload (SIGHUP) may change while running.
    public var feeds: FeedConfiguration
    /// The store directory (opened once).
    public var storeDirectory: String
    /// Cap on the bytes of cached images; 0 = none.
    public var maxBytes: Int64
    /// How the HTTP client fetches (taken once, at start).
    public var fetch: FetchPolicy
    /// Headers for the feeds' origins (a reload changes them: `apply(_:)`).
    public var credentials: FetchCredentials
    /// Threads that run disk work: verification, feed decoding and storing,
    /// maintenance (an image download's commit has its own: `commitThreads`).
    public var workerThreads: Int
    /// Log records beyond the live ones before the log is compacted.
    public var compactionSlack: Int
    /// When object bytes are hashed again before they are served.
    public var verifyReads: VerifyReads = .always
    /// The background scrub (`scrub-interval`, `scrub-rate`; a reload changes them: `apply(_:)`).
    public var scrub = ScrubSettings()
    /// What clients may ask of variants (a reload changes it: `apply(_:)`).
    public var variants = VariantSettings()
    /// Cap on the bytes of variants (`variant-max-size`); 0: `maxBytes` alone.
    public var maxVariantBytes: Int64 = 0
    /// The variant helpers' pool; nil when `cached-variant` was not found
    /// (variants are then refused, saying so).
    public var variantPool: VariantPoolConfiguration?

    public init(feeds: FeedConfiguration, storeDirectory: String, maxBytes: Int64, fetch: FetchPolicy,
                credentials: FetchCredentials = .none,
                workerThreads: Int = ServiceConfiguration.defaultWorkerThreads,
                compactionSlack: Int = StoreConfiguration.defaultCompactionSlack) {
        self.feeds = feeds
        self.storeDirectory = storeDirectory
        self.maxBytes = maxBytes
        self.fetch = fetch
        self.credentials = credentials
        self.workerThreads = workerThreads
        self.compactionSlack = compactionSlack
    }

    /// Four workers: enough to overlap the fsyncs of concurrent disk work (a
    /// feed's store, a variant's commit, maintenance) on two cores without
    /// queueing behind one slow disk call, few enough that the event loop
    /// keeps a core. Image downloads commit on their own threads (`commitThreads`).
    public static let defaultWorkerThreads = 4

    /// Threads that commit finished image downloads (`cached-sync-N`: a
    /// thread's name has 15 bytes at most, so "cached-commit-10" would not fit):
    /// one per transfer the client runs at once (`concurrency`), at most
    /// `maxCommitThreads`. A commit is three waits on the disk (the file's
    /// fsync, its directory's, the log's group commit) and almost no CPU, so
    /// `concurrency` downloads' syncs overlap (a journaling file system joins
    /// concurrent fsyncs into one journal commit) and none queues behind the
    /// workers' CPU work (docs/performance.md, "Prefetch").
    public var commitThreads: Int { min(max(1, fetch.concurrency), Self.maxCommitThreads) }

    /// The most commit threads, whatever `concurrency` says (it goes to 256).
    public static let maxCommitThreads = 64
}

/// The feed URLs and the body limit: the part of the configuration a reload applies.
public struct FeedConfiguration: Sendable, Equatable {
    public var postsURL: String?
    public var imagesURL: String?
    /// Base for relative image URLs; nil: the directory of `imagesURL`.
    public var imagesBaseURL: String?
    /// Largest image body accepted (`max-object-size`).
    public var maxObjectSize: Int64
    /// Largest feed document accepted, each page of the posts or the
    /// manifest (`feed-max-size`).
    public var feedMaxSize: Int64 = FeedConfiguration.defaultFeedMaxSize
    /// 1 GiB: a bare array of a million posts of a few hundred bytes fits.
    public static let defaultFeedMaxSize: Int64 = 1 << 30
    /// Bytes kept free on the store's file system for the posts and the log
    /// (`min-free-space`): below it image downloads are refused; 0 = off.
    public var minFreeSpace: Int64
    /// Free space a posts refresh leaves on the store's file system at least
    /// (`posts-min-free-space`): one that would leave less is refused, the
    /// posts kept as they were; 0 = off.
    public var postsMinFreeSpace: Int64 = 0
    /// Where the posts are in each page and how pages follow (`posts-items`, ...).
    public var postsShape: FeedShape
    /// The same for the manifest (`images-items`, ...).
    public var imagesShape: FeedShape
    /// Which members hold a post's id and an image's URL and description.
    public var fields: ItemFields
    /// How much history the posts keep (`posts-keep`).
    public var postsKeep: PostsKeep = .feed
    /// The longest a whole refresh of a feed, every page, may take
    /// (`feed-timeout`): past it the refresh fails, naming the page it reached.
    public var feedTimeout: Duration = FeedConfiguration.defaultFeedTimeout
    /// 15 minutes: a million posts from one origin take some 5 (docs/performance.md).
    public static let defaultFeedTimeout = Duration.seconds(900)
    /// How long an image stays fresh when its response states no lifetime
    /// (`images-revalidate-after`, whole seconds); zero: such images are
    /// never revalidated.
    public var imagesRevalidateAfter: Duration = FeedConfiguration.defaultRevalidateAfter
    /// One day.
    public static let defaultRevalidateAfter = Duration.seconds(86400)

    public init(postsURL: String?, imagesURL: String?, imagesBaseURL: String?, maxObjectSize: Int64,
                postsShape: FeedShape = FeedShape(prefix: "posts"), imagesShape: FeedShape = FeedShape(prefix: "images"),
                fields: ItemFields = ItemFields(), minFreeSpace: Int64 = 0) {
        self.postsURL = postsURL
        self.imagesURL = imagesURL
        self.imagesBaseURL = imagesBaseURL
        self.maxObjectSize = maxObjectSize
        self.minFreeSpace = minFreeSpace
        self.postsShape = postsShape
        self.imagesShape = imagesShape
        self.fields = fields
    }

    /// True when one walk of the pages serves both feeds: the same URL,
    /// followed the same way (each page is then fetched once per prefetch).
    var feedsSharePages: Bool {
        guard let p = postsURL, p == imagesURL else { return false }
        return postsShape.next == imagesShape.next && postsShape.maxPages == imagesShape.maxPages && postsShape.maxItems == imagesShape.maxItems
            && postsShape.paging == imagesShape.paging
    }
}
