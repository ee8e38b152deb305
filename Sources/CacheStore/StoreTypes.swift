import CacheHTTP
import CacheSystem

/// A cached image: which object holds a row's bytes.
public struct ObjectRef: Sendable, Hashable {
    public var hash: Hash128
    public var size: Int64
    public var type: ImageType

    /// The object named `hash`, of `size` bytes and image type `type`.
    public init(hash: Hash128, size: Int64, type: ImageType) {
        self.hash = hash
        self.size = size
        self.type = type
    }
}

/// A stored variant of an image: its object and its size in pixels.
public struct VariantRef: Sendable, Hashable {
    public var object: ObjectRef
    public var width: Int
    public var height: Int

    public init(object: ObjectRef, width: Int, height: Int) {
        self.object = object
        self.width = width
        self.height = height
    }
}

/// Which variant: of which object, made how.
public struct VariantKey: Sendable, Hashable, Comparable {
    public var source: Hash128
    public var spec: VariantSpec

    public init(source: Hash128, spec: VariantSpec) {
        self.source = source
        self.spec = spec
    }

    /// Source, then the spec's fields: the order compaction writes them in.
    public static func < (a: VariantKey, b: VariantKey) -> Bool {
        func fields(_ s: VariantSpec) -> [Int] { [s.width ?? 0, s.height ?? 0, Int(s.fit.rawValue), Int(s.format.rawValue)] }
        if a.source != b.source { return a.source < b.source }
        return fields(a.spec).lexicographicallyPrecedes(fields(b.spec))
    }
}

/// One row of the image manifest, as the store knows it.
public struct Row: Sendable, Equatable {
    /// The URL as written in the manifest (possibly relative).
    public var url: String
    public var description: String?
    /// The cached object, or nil when the row is not cached.
    public var object: ObjectRef?
    /// What the origin last said of the object's freshness; nil when not
    /// cached, or mapped by a log older than format version 3.
    public var freshness: ImageFreshness? = nil
}

/// HTTP validators kept per feed page for conditional requests.
public struct Validators: Sendable, Equatable {
    public var etag: String?
    public var lastModified: String?
    public init(etag: String? = nil, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// These validators less any value that is not a safe HTTP field value
    /// (`HTTPGrammar.isFieldValue`): such a value would split the conditional
    /// request header it is sent in, so it is never stored or sent.
    public var sanitized: Validators {
        Validators(etag: etag.flatMap { HTTPGrammar.isFieldValue($0) ? $0 : nil },
                   lastModified: lastModified.flatMap { HTTPGrammar.isFieldValue($0) ? $0 : nil })
    }

    /// True when `sanitized` would drop a value.
    public var isDamaged: Bool { sanitized != self }

    /// The ETag stored for a feed whose server cannot match its own ETags
    /// (it answers them with a full 200): an empty one, never sent, so the
    /// feed is revalidated with Last-Modified alone, also after a restart.
    public static let ignoredETag = ""

    /// True when the feed's ETags are not to be sent (`ignoredETag`).
    public var etagIgnored: Bool { etag == Validators.ignoredETag }
}

/// Counts for `status`.
public struct StoreStats: Sendable {
    public var posts: Int
    public var rows: Int
    public var rowsCached: Int
    public var objects: Int
    public var bytes: Int64
    public var logRecords: Int
    public var evictions: Int
    /// Variants stored.
    public var variants: Int = 0
}

/// What a posts refresh changed.
public struct PostsChange: Sendable, Equatable {
    public var fetched = 0
    public var unchanged = 0
    public var removed = 0
}

/// Where and how big the store is allowed to be.
/// What the start's sweep of object files did (`Store.dropMissingObjects`).
public struct ObjectFilesReport: Sendable, Equatable {
    /// Objects dropped: their file was missing or of the wrong size.
    public var dropped = 0
    /// Object files looked at, of `total` (the objects the index knew).
    public var checked = 0
    public var total = 0
    /// True when `Store.stopPasses` cut the sweep short.
    public var stopped = false

    public init(dropped: Int = 0, checked: Int = 0, total: Int = 0, stopped: Bool = false) {
        self.dropped = dropped
        self.checked = checked
        self.total = total
        self.stopped = stopped
    }
}

public struct StoreConfiguration: Sendable {
    /// The store directory; created if missing.
    public var directory: String
    /// Cap on the bytes of `objects/`; 0 means no cap. Default 0.
    public var maxBytes: Int64 = 0
    /// Cap on the bytes of variant objects (`variant-max-size`): past it the
    /// least recently used variants are evicted; 0 means none but `maxBytes`.
    public var maxVariantBytes: Int64 = 0
    /// Compact automatically once the log holds this many more records than
    /// live state needs.
    public var compactionSlack: Int = StoreConfiguration.defaultCompactionSlack

    /// 10,000 records of slack: compaction rewrites the log about once per
    /// 10,000 changes, so its cost is amortised and the log stays small.
    public static let defaultCompactionSlack = 10_000
    /// Compact also once the log is longer than twice its compacted length
    /// plus this many bytes (few but large records: a string-id feed whose
    /// order changes logs its whole order each time).
    public var compactionSlackBytes: Int64 = StoreConfiguration.defaultCompactionSlackBytes
    /// 64 MiB: a 50,000-post feed of UUIDs logs about 2 MB of order per
    /// refresh that moves a post, so it is compacted every 30 or so of them.
    public static let defaultCompactionSlackBytes: Int64 = 64 << 20
    /// Called once, on the writing thread, when writes stop because the log
    /// or lock was removed or replaced (the daemon logs it as an error).
    public var onWritesStopped: (@Sendable (String) -> Void)?
    /// Called once for each entry in `tmp/`, `posts/` or `objects/` that
    /// start-up cleanup or gc leaves alone because the store did not make it
    /// (a name not of the store's forms, a link, a directory), with a line
    /// naming it; bounded (`IgnoredEntries.limit`). The daemon logs it.
    public var onIgnoredEntry: (@Sendable (String) -> Void)?
    /// Called with a warning about the store's own files that is not an
    /// error: a post whose file name is taken by another post's (two string
    /// ids whose hashes collide), once per post; an object file that could
    /// not be read for a range (the cause: it is then handled as corrupt);
    /// chunk digests that could not be logged; post files that could not be
    /// written, removed or put back where nothing is thrown (the start's
    /// reconciliation, the stale files after a refresh, the files put back
    /// after a failed one: one line each time, with the first error). The
    /// daemon logs it.
    public var onWarning: (@Sendable (String) -> Void)?
    /// Called with a line saying that a long pass the store ran inside a
    /// write (compaction, gc or eviction's removals after a commit) was cut
    /// short by `stopPasses`: what, how far, and what becomes of the rest.
    /// The daemon logs it as a notice.
    public var onNotice: (@Sendable (String) -> Void)?
    /// Called once for each object file set aside (its bytes did not match
    /// its name, or it could not be read), under the store's writer lock and
    /// before the index forgets the object: it must not block or call the
    /// store. The service logs and counts it there, and starts the repair,
    /// so that no request can find the object gone with no repair under way.
    public var onSetAside: (@Sendable (SetAside) -> Void)?
    /// When object bytes are hashed again before they are served
    /// (`ReadVerification.resolve`). Default `always`.
    public var verifyReads: VerifyReads = .always

    public init(directory: String, maxBytes: Int64 = 0) {
        self.directory = directory
        self.maxBytes = maxBytes
    }
}
