import CacheStore
import CacheFetch
import CacheProtocol
import CacheService
import CacheSystem

/// The daemon's settings (docs/operations.md, "Configuration"), typed. The
/// defaults are the initial values here (the fetch ones are `FetchPolicy`'s);
/// every name, parser, help line and reload rule is in `Settings.table`.
public struct Settings: Sendable, Equatable {
    public var postsURL: String?
    public var imagesURL: String?
    public var imagesBaseURL: String?
    /// Where the posts are in each page (nil: the document, or a JSON Feed's items).
    public var postsItems: JSONPointer?
    /// Each post's id.
    public var postsID = JSONPointer.member("id")
    /// The next page's URL in a page of posts (nil: a JSON Feed's next_url, else Link headers only).
    public var postsNext: JSONPointer?
    public var postsMaxPages = 1000
    /// Posts one refresh reads at most, from all its pages.
    public var postsMaxItems = FeedShape.defaultMaxItems
    /// How the posts' pages follow each other, and the post inside each item.
    public var postsPaging = FeedPagingSettings()
    /// How much of the posts' history is kept.
    public var postsKeep = PostsKeep.feed
    /// The longest a whole feed refresh may take.
    public var feedTimeout = FeedConfiguration.defaultFeedTimeout
    /// The same for the image manifest.
    public var imagesItems: JSONPointer?
    public var imagesNext: JSONPointer?
    /// Nil: `postsMaxPages` when both feeds are one URL, else 1000.
    public var imagesMaxPages: Int?
    /// Nil: `postsMaxItems` when both feeds are one URL, else 1,000,000.
    public var imagesMaxItems: Int?
    /// The same for the manifest (unset values: the posts' when both are one URL).
    public var imagesPaging = FeedPagingSettings()
    /// Each manifest item's image URL and description.
    public var imagesURLField = JSONPointer.member("url")
    public var imagesDescriptionField = JSONPointer.member("description")
    /// Default per `DefaultPaths.store`.
    public var store: String
    /// Default per `DefaultPaths.socket`.
    public var socket: String
    public var maxSize: Int64 = 0
    public var verifyReads: VerifyReads = .auto
    /// From the start of one scrub pass to the start of the next (whole seconds); zero = no scrub.
    public var scrubInterval = ScrubSettings.defaultInterval
    /// Bytes per second the scrub hashes at most.
    public var scrubRate = ScrubSettings.defaultRate
    public var maxObjectSize: Int64 = 64 << 20
    /// Largest feed document accepted, each page of either feed.
    public var feedMaxSize: Int64 = FeedConfiguration.defaultFeedMaxSize
    /// How long an image stays fresh when its response states no lifetime (whole seconds); zero = never revalidated.
    public var imagesRevalidateAfter = FeedConfiguration.defaultRevalidateAfter
    /// Free space kept on the store's file system for the posts and the log:
    /// below it image downloads are refused (0 = off). 64M: as much as the
    /// largest feed body `max-object-size` accepts by default, which is about
    /// what one refresh of the posts writes.
    public var minFreeSpace: Int64 = 64 << 20
    /// Free space a posts refresh must leave (the posts may use what
    /// `minFreeSpace` keeps from the images, not the last of it). Nil: a
    /// quarter of `minFreeSpace` (16M at its default).
    public var postsMinFreeSpace: Int64?
    /// The largest variant width or height, and the bound of a side a request leaves free.
    public var variantMaxDimension = 2048
    /// The widths and heights a variant may be asked for; empty: any up to the bound.
    public var variantSizes: [Int] = []
    /// Cap on the bytes of variants: past it the least recently used are evicted.
    /// 1 GiB: some 200,000 thumbnails of a few KiB, and bounded whatever clients ask.
    public var variantMaxSize: Int64 = 1 << 30
    /// An image of more pixels (its first frame) gets no variant: refused by its header.
    public var maxImagePixels: Int64 = 100_000_000
    /// Variant helpers running at most.
    public var variantHelpers = 2
    /// Each variant helper's address space.
    public var variantMemory: Int64 = 2 << 30
    /// Longest a variant may take to make, once a helper has it.
    public var variantTimeout = Duration.seconds(60)
    /// How long a failure of an original's helper is remembered, doubled with each failure again.
    public var variantRetryAfter = Duration.seconds(60)
    /// Parallel downloads, retries, timeouts, redirects, TLS trust and proxy.
    public var fetch = FetchPolicy()
    /// `fetch-header`, in order; sent only to the origins of the feed URLs.
    public var fetchHeaders: [FetchHeader] = []
    /// `fetch-header-file`, with the headers read from it once parsing ends.
    public var fetchHeaderFile: FetchHeaderFile?
    public var maxConnections = 4096
    public var idleTimeout = Duration.seconds(300)
    public var maxQueuedBytes: Int64 = 4 << 20
    public var maxQueuedBytesTotal: Int64 = 256 << 20
    public var maxJSONDepth = JSONParser.defaultMaxDepth
    public var prefetchOnStart = false
    /// Where the HTTP front-end listens; empty: it is off (docs/http.md).
    public var httpListen: [HTTPAddress] = []
    /// Prefetch, verify, gc and compact over HTTP, as POST.
    public var httpAllowAdmin = false
    /// Host names an HTTP request may name besides IP literals and localhost.
    public var httpAllowedHosts: [String] = []
    /// Take the client's scheme from `X-Forwarded-Proto`/`Forwarded` (a proxy's).
    public var httpTrustForwarded = false
    /// Store paths in HTTP answers (`/images`, error messages).
    public var httpShowPaths = false
    /// HTTP connections at once (of `maxConnections`).
    public var httpMaxConnections = 1024
    /// How long an HTTP request (head and body) may take to arrive; 0: no limit.
    public var httpRequestTimeout = Duration.seconds(30)
    public var logLevel: LogLevel = .info
    /// The configuration file the settings were read from, if any (not a setting).
    public var configFile: String?

    /// Every key, as written in flags (`--key`), the environment
    /// (`SettingName.environment`) and the configuration file.
    public static var keys: [String] { table.map(\.name) }

    public init(environment: [String: String] = [:]) {
        store = DefaultPaths.store(environment: environment)
        socket = DefaultPaths.socket(environment: environment)
    }

    /// Sets one key from text; throws a message naming the key and the problem.
    public mutating func set(_ key: String, _ value: String) throws(SettingsError) {
        guard let spec = Settings.spec(key) else { throw SettingsError("unknown setting \"\(key)\"") }
        try spec.set(&self, value)
    }

    /// The setting named `key`, if there is one.
    static func spec(_ key: String) -> SettingSpec? { table.first { $0.name == key } }
}

/// What the command line asks for.
public enum ParsedCommandLine: Sendable, Equatable {
    case run(Settings)
    /// `--check-config`: the settings are valid; print them, do not run.
    case checked(Settings)
    case help
    case version
}

/// A setting that could not be used.
public struct SettingsError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
