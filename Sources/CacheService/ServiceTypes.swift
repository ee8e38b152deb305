import CacheSystem
import CacheStore

/// An operation's answer: here now (a hit, an error found at once), or
/// later. With `.later` the operation calls its completion exactly once, on
/// a worker or fetch thread; with `.now` it never calls it.
public enum Outcome<Value: Sendable>: Sendable {
    case now(Result<Value, CacheError>)
    case later
}

/// A completion of a service operation; runs on a worker or fetch thread.
public typealias Completion<Value: Sendable> = @Sendable (Result<Value, CacheError>) -> Void

/// A page of posts in list order (docs/protocol.md, `list_posts`), each
/// the exact JSON stored, with the id it is kept by. The posts' bytes are
/// lent from the store (`PostBodies`), not copied: a listing waiting to be
/// written holds some 12 bytes a post.
public struct PostsPage: Sendable {
    public var total: Int
    public var ids: [PostID]
    public var posts: PostBodies

    public init(total: Int, ids: [PostID], posts: PostBodies) {
        self.total = total
        self.ids = ids
        self.posts = posts
    }

    /// A page whose posts are given as arrays.
    public init(total: Int, ids: [PostID], posts: [[UInt8]]) {
        self.init(total: total, ids: ids, posts: PostBodies(posts))
    }
}

/// One post: the id it is kept by (`posts-id`) and its exact JSON.
public struct StoredPost: Sendable, Equatable {
    public var id: PostID
    public var json: [UInt8]
}

/// A cached image's object.
public struct ObjectInfo: Sendable, Equatable {
    /// The XXH3-128 of the bytes: the object's name.
    public var hash: Hash128
    public var size: Int64
    /// The detected image type's MIME type.
    public var mimeType: String
    /// The object file's absolute path.
    public var path: String
}

/// One row of the image manifest.
public struct ImageEntry: Sendable, Equatable {
    public var row: Int
    /// The absolute URL fetched, or the URL as written when it cannot be fetched.
    public var url: String
    public var description: String?
    /// The cached object; nil when the row is not cached.
    public var object: ObjectInfo?
    /// Why the row's URL last failed, since it last succeeded (in memory
    /// only); nil when it never failed or succeeded since.
    public var lastError: RowError? = nil
    /// The variant asked for (`get_image` with `variant`), once made.
    public var variant: VariantInfo? = nil
}

/// A page of the manifest.
public struct ImagesPage: Sendable {
    public var total: Int
    public var images: [ImageEntry]
}

/// A verified object's bytes, after the front-end's framing `prefix`.
public enum ObjectBody: Sendable {
    /// Prefix and bytes in one buffer (small objects already in memory).
    case inline([UInt8])
    /// The prefix, then `size` bytes of an open file from offset 0; the
    /// receiver closes the file.
    case file(prefix: [UInt8], FileDescriptor, size: Int64)
}

/// An object's file, opened read-only and verified through this very
/// descriptor: its bytes hashed to its name. Its position is 0. The receiver
/// closes it.
public struct VerifiedFile: Sendable {
    public var descriptor: FileDescriptor
    public var size: Int64
}

/// What a posts refresh did.
public struct PostsSummary: Sendable {
    public var fetched = 0, unchanged = 0, removed = 0, invalid = 0
    /// Posts kept from before that the feed no longer lists (`posts-keep`).
    public var kept = 0
    /// The feed's "has more" warning, when its last page has more than the settings follow.
    public var warnings: [String] = []
}

/// What an images prefetch did. Each row is counted once: `cached`,
/// `downloaded`, `revalidated` (`changed` + `unchanged`), `failed` or
/// `skipped`. `transfers` counts HTTP requests (one per distinct URL),
/// `bytes` the bytes of the 200s.
public struct ImagesSummary: Sendable {
    /// Rows whose image was downloaded (not cached before, or `force`).
    public var downloaded = 0
    /// Rows cached and fresh: nothing was sent for them.
    public var cached = 0
    /// Rows that failed (a cached row whose revalidation failed keeps its object).
    public var failed = 0
    /// Rows whose stale image was revalidated: `changed` + `unchanged`.
    public var revalidated = 0
    /// Revalidated rows that got new bytes (and were remapped to them).
    public var changed = 0
    /// Revalidated rows whose image stays: a 304, or a 200 with the same bytes.
    public var unchanged = 0
    /// Uncached rows not tried: they keep failing and their backoff has not passed.
    public var skipped = 0
    /// HTTP transfers made (or joined) for the rows: one per distinct URL.
    public var transfers = 0
    public var bytes: Int64 = 0
    /// Rows that failed, in row order.
    public var failures: [RowFailure] = []
}

/// A row an images prefetch could not cache.
public struct RowFailure: Sendable {
    public var row: Int
    public var url: String
    public var error: String
}

/// What a prefetch did: the parts it was asked for.
public struct PrefetchReport: Sendable {
    public var posts: PostsSummary?
    public var images: ImagesSummary?
    /// The feeds' "has more" warnings: pages the settings do not follow (docs/protocol.md, "Never a silent first page").
    public var warnings: [String] = []

    public init(posts: PostsSummary? = nil, images: ImagesSummary? = nil) {
        self.posts = posts
        self.images = images
    }
}

/// The last prefetch that finished, for `status` (`last_prefetch`).
public struct LastPrefetch: Sendable {
    /// When it started and finished, unix seconds.
    public var started: Double
    public var finished: Double
    /// Its report; nil when it failed as a whole.
    public var report: PrefetchReport?
    /// Why it failed, when it did.
    public var error: String?
    public var succeeded: Bool { report != nil }
}

/// Progress of a prefetch phase (`posts`, `images`).
public struct Progress: Sendable {
    public var phase: String
    public var done: Int
    public var total: Int
    public var bytes: Int64
}

/// What `verify` found.
public struct VerifyReport: Sendable {
    public var checked: Int
    /// Objects that failed verification (32 hex digits each).
    public var corrupt: [String]
    /// Of those, how many were downloaded again.
    public var repaired: Int
}

/// What `collectGarbage` removed.
public struct GarbageReport: Sendable {
    public var removed: Int
    public var freedBytes: Int64
}

/// What `compact` did to the log (garbage is collected after it).
public struct CompactionReport: Sendable {
    public var recordsBefore: Int
    public var recordsAfter: Int
}

/// The service's state for `status`.
public struct ServiceStatus: Sendable {
    public var posts: Int
    public var images: Int
    public var imagesCached: Int
    public var objects: Int
    public var bytes: Int64
    public var maxBytes: Int64
    public var uptimeSeconds: UInt64
    public var counters: CounterValues
    public var evictions: Int
    public var storeDirectory: String
    public var logRecords: Int
    /// The last prefetch that finished since the daemon started; nil when none did.
    public var lastPrefetch: LastPrefetch? = nil
    /// The `verify-reads` mode in effect: `always` or `on-change`.
    public var verifyReads = "always"
    /// Variants stored.
    public var variants = 0
    /// The background scrub: its state, the pass under way, the last one.
    public var scrub = ScrubStatus(state: .off, interval: .zero, rate: ScrubSettings.defaultRate, pass: nil, last: nil,
                                   nextStart: nil, sinceStart: ScrubStatus.Counts())
    /// The feeds' standing "has more" warnings (docs/protocol.md, "Never a silent first page").
    public var feedWarnings: [String] = []
}

/// What happens in the service that a front-end may show as it happens
/// (the HTTP front-end's `/events`). Observers run on worker and fetch
/// threads and must not block.
public enum ServiceEvent: Sendable {
    /// A prefetch's progress (the same as its `progress` callbacks get).
    case progress(Progress)
    /// `rows` now show `object` (a download finished).
    case rowsCached(rows: [Int], object: ObjectInfo)
    /// A prefetch finished; `succeeded` is false when it failed as a whole.
    case prefetchFinished(succeeded: Bool)
}
