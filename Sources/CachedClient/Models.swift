import CacheProtocol
import CacheSystem
/// A post's id: an integer or a string (`post(id: 5)`, `post(id: "a1b2")`),
/// Codable as the JSON integer or string it is.
public typealias PostID = CacheSystem.PostID
/// A variant as asked for: `CachedClient.image(row:variant:)`.
public typealias VariantRequest = CacheSystem.VariantRequest
public typealias VariantFit = CacheSystem.VariantFit
public typealias VariantFormat = CacheSystem.VariantFormat

/// A post, as the feed gave it and the daemon stored it (docs/protocol.md,
/// "Feeds"): `id` always; `userId` (as `userID`), `title` and `body` when
/// the feed had them with those types; every other member, and those three
/// when of another type (the feed may send any), in `extra`.
public struct Post: Codable, Sendable, Equatable, Identifiable {
    /// The id the daemon keeps the post by (an integer or a string; the
    /// member `posts-id` names, `id` by default). When `posts-id` names
    /// another member, the object's own `id` member, if any, is in `extra`.
    public var id: PostID
    public var userID: Int?
    public var title: String?
    public var body: String?
    /// The members of the stored object that the properties above do not name.
    public var extra: [String: JSONValue]

    public init(id: PostID, userID: Int? = nil, title: String? = nil, body: String? = nil, extra: [String: JSONValue] = [:]) {
        self.id = id
        self.userID = userID
        self.title = title
        self.body = body
        self.extra = extra
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case id
        case userID = "userId"
        case title, body
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(PostID.self, forKey: .id)
        // A member of another type is not an error: it stays in `extra`, as sent.
        userID = try? c.decodeIfPresent(Int.self, forKey: .userID)
        title = try? c.decodeIfPresent(String.self, forKey: .title)
        body = try? c.decodeIfPresent(String.self, forKey: .body)
        let all = try decoder.container(keyedBy: AnyKey.self)
        var typed: Set<String> = [CodingKeys.id.rawValue]
        if userID != nil { typed.insert(CodingKeys.userID.rawValue) }
        if title != nil { typed.insert(CodingKeys.title.rawValue) }
        if body != nil { typed.insert(CodingKeys.body.rawValue) }
        var extra: [String: JSONValue] = [:]
        for key in all.allKeys where !typed.contains(key.stringValue) {
            let value = try all.decode(JSONValue.self, forKey: key)
            // A named member that is null is simply absent.
            if value == .null && CodingKeys(rawValue: key.stringValue) != nil { continue }
            extra[key.stringValue] = value
        }
        self.extra = extra
    }

    public func encode(to encoder: any Encoder) throws {
        var all = encoder.container(keyedBy: AnyKey.self)
        for (k, v) in extra { try all.encode(v, forKey: AnyKey(stringValue: k)) }
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encodeIfPresent(userID, forKey: .userID)
        try c.encodeIfPresent(title, forKey: .title)
        try c.encodeIfPresent(body, forKey: .body)
    }
}

/// One row of the image manifest, and its cached object if there is one.
public struct ImageRow: Codable, Sendable, Equatable, Identifiable {
    public var row: Int
    /// The absolute URL the image is fetched from (as written when it cannot be fetched).
    public var url: String
    public var description: String?
    /// The object's hash (32 lowercase hex digits); nil when the row is not cached.
    public var hash: String?
    public var size: Int64?
    /// The image's MIME type, from its bytes' signature.
    public var type: String?
    /// The object file's absolute path (read-only; `openImage(row:)` hands out a verified descriptor instead).
    public var path: String?
    /// Why the row's URL last failed, since it last succeeded (the daemon keeps it in memory only).
    public var lastError: RowError?
    /// The variant asked for with `image(row:variant:)`; nil otherwise.
    public var variant: Variant?

    /// A variant of the row's image, stored as an object of its own.
    public struct Variant: Codable, Sendable, Equatable {
        /// The variant's object hash: `read(hash:)` and `open` take it.
        public var hash: String
        public var size: Int64
        /// Its MIME type: image/jpeg, image/png, image/webp or image/avif.
        public var type: String
        /// Its object file's path (absent over HTTP unless `http-show-paths`).
        public var path: String?
        /// Its size in pixels.
        public var width: Int
        public var height: Int
    }

    /// A row's last failure.
    public struct RowError: Codable, Sendable, Equatable {
        /// When, unix seconds.
        public var time: Double
        /// Why, without the URL (`HTTP 404 Not Found`, `not an image: ...`).
        public var reason: String
        /// The origin's HTTP status, when it answered with an error status.
        public var status: Int?
    }

    enum CodingKeys: String, CodingKey {
        case row, url, description, hash, size, type, path, variant
        case lastError = "last_error"
    }

    public var id: Int { row }
    /// True when the image's bytes are in the store.
    public var isCached: Bool { hash != nil }
}

/// What the daemon holds and its counters (`status`).
public struct Status: Codable, Sendable, Equatable {
    public var posts: Int
    public var images: Int
    public var imagesCached: Int
    public var objects: Int
    public var bytes: Int64
    public var maxBytes: Int64
    public var uptimeSeconds: Int64
    public var version: String
    public var store: String
    public var socket: String
    public var logRecords: Int
    /// `hits`, `misses`, `downloads`, `download_bytes`, `coalesced`, `errors`,
    /// `requests`, `connections`, `upstream_errors`, `quarantined`,
    /// `read_errors`, `evictions`, `variants_made`, `variant_hits`, `variant_failures`,
    /// `variant_jobs`.
    public var counters: [String: Int64]
    /// Image variants stored (nil from a daemon without variants).
    public var variants: Int?
    /// The last prefetch that finished since the daemon started; nil when none did.
    public var lastPrefetch: LastPrefetch?
    /// The `verify-reads` mode in effect, `always` or `on-change` (nil from a daemon that predates it).
    public var verifyReads: String?
    /// The background scrub; nil from a daemon without one.
    public var scrub: Scrub?

    /// A finished prefetch, as `status` keeps it.
    public struct LastPrefetch: Codable, Sendable, Equatable {
        /// When it started and finished, unix seconds.
        public var started: Double
        public var finished: Double
        public var succeeded: Bool
        /// Its answer's `posts` and `images` (no `failures`); nil when it failed as a whole.
        public var summary: PrefetchSummary.Parts?
        /// Why it failed, when it did.
        public var error: String?
    }

    enum CodingKeys: String, CodingKey {
        case posts, images, objects, bytes, version, store, socket, counters, scrub, variants
        case imagesCached = "images_cached", maxBytes = "max_bytes", uptimeSeconds = "uptime_s", logRecords = "log_records"
        case lastPrefetch = "last_prefetch", verifyReads = "verify_reads"
    }
}

extension Status {
    /// The background re-hash of every object (docs/operations.md, "Scrub").
    public struct Scrub: Codable, Sendable, Equatable {
        /// `off`, `idle` or `running`.
        public var state: String
        /// `scrub-interval` in seconds and `scrub-rate` in bytes per second.
        public var intervalSeconds: Int64
        public var rate: Int64
        /// The pass under way; nil between passes.
        public var pass: Pass?
        /// The last pass that ended; nil before the first.
        public var last: LastPass?
        /// When the next pass starts, unix seconds; nil while one runs or when off.
        public var nextStart: Int64?
        /// Everything the scrub checked and found since the daemon started.
        public var sinceStart: Counts

        /// Objects and bytes checked, and the objects found corrupt, unreadable or missing.
        public struct Counts: Codable, Sendable, Equatable {
            public var objects: Int
            public var bytes: Int64
            public var corrupt: Int
            public var unreadable: Int
            public var missing: Int
        }

        /// A pass under way: when it started (unix seconds), the last object
        /// it checked, the objects and bytes it covers, what it checked so far.
        public struct Pass: Codable, Sendable, Equatable {
            public var started: Int64
            public var position: String?
            public var objects: Int
            public var bytes: Int64
            public var checked: Counts
        }

        /// A pass that ended, unix seconds, and what it checked and found.
        public struct LastPass: Codable, Sendable, Equatable {
            public var started: Int64
            public var ended: Int64
            public var checked: Counts
        }

        enum CodingKeys: String, CodingKey {
            case state, rate, pass, last
            case intervalSeconds = "interval_s", nextStart = "next_start", sinceStart = "since_start"
        }
    }
}

/// What a prefetch refreshes: `.all`, `.posts` or `.images`.
public typealias PrefetchScope = CacheProtocol.PrefetchTarget

/// How far a prefetch phase (`posts`, `images`) has come.
public struct PrefetchProgress: Codable, Sendable, Equatable {
    public var phase: String
    public var done: Int
    public var total: Int
    public var bytes: Int64
}

/// What a prefetch did: the parts it was asked for.
public struct PrefetchSummary: Codable, Sendable, Equatable {
    public struct Posts: Codable, Sendable, Equatable {
        public var fetched: Int, unchanged: Int, removed: Int, invalid: Int
        /// Posts kept from before by `posts-keep` (nil from an older daemon).
        public var kept: Int?
    }
    /// Rows, each counted once: `downloaded`, `cached`, `revalidated`
    /// (`changed` + `unchanged`), `failed` or `skipped`; `transfers` counts
    /// HTTP requests, one per distinct URL.
    public struct Images: Codable, Sendable, Equatable {
        public var downloaded: Int, cached: Int, failed: Int
        /// 0 from a daemon older than revalidation, which sends none of these five.
        public var revalidated: Int, changed: Int, unchanged: Int, skipped: Int, transfers: Int
        public var bytes: Int64

        enum CodingKeys: String, CodingKey { case downloaded, cached, failed, revalidated, changed, unchanged, skipped, transfers, bytes }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            downloaded = try c.decode(Int.self, forKey: .downloaded)
            cached = try c.decode(Int.self, forKey: .cached)
            failed = try c.decode(Int.self, forKey: .failed)
            bytes = try c.decode(Int64.self, forKey: .bytes)
            func count(_ k: CodingKeys) throws -> Int { try c.decodeIfPresent(Int.self, forKey: k) ?? 0 }
            revalidated = try count(.revalidated)
            changed = try count(.changed)
            unchanged = try count(.unchanged)
            skipped = try count(.skipped)
            transfers = try count(.transfers)
        }
    }
    /// The `posts` and `images` parts alone (`Status.LastPrefetch.summary`).
    public struct Parts: Codable, Sendable, Equatable {
        public var posts: Posts?
        public var images: Images?
    }
    /// A row that could not be cached.
    public struct Failure: Codable, Sendable, Equatable {
        public var row: Int
        public var url: String
        public var error: String
    }
    public var posts: Posts?
    public var images: Images?
    public var failures: [Failure]
    /// A feed whose last page has more than its settings follow, with the
    /// setting to use (docs/protocol.md, "Never a silent first page"); nil
    /// from an older daemon.
    public var warnings: [String]?
}

/// One item of `prefetch`'s stream: progress, then the summary last.
public enum PrefetchEvent: Sendable, Equatable {
    case progress(PrefetchProgress)
    case finished(PrefetchSummary)
}

/// What `verify` found.
public struct VerifyReport: Codable, Sendable, Equatable {
    public var checked: Int
    /// Hashes of the objects that failed verification (quarantined).
    public var corrupt: [String]
    /// Of those, how many were downloaded again.
    public var repaired: Int
}

/// A cached image opened read-only by the daemon, verified through this
/// very descriptor (`open`, docs/protocol.md). Read it from offset 0
/// (`pread`, `read`, `mmap`); the caller closes it (`close()`).
/// An object opened by `CachedClient.openObjects(hashes:)`: a read-only
/// descriptor of its file, which the daemon verified, at offset 0.
public struct ObjectFile: Sendable {
    /// The open file descriptor.
    public let descriptor: Int32
    public let size: Int64
    /// The hash that named it.
    public let hash: String

    /// Closes the descriptor.
    public func close() {
        _ = closeDescriptor(descriptor)
    }
}

public struct ImageFile: Sendable {
    /// The open file descriptor.
    public let descriptor: Int32
    public let size: Int64
    public let row: ImageRow

    /// Closes the descriptor.
    public func close() {
        _ = closeDescriptor(descriptor)
    }
}
