import CacheFetch
import CacheStore
import CacheSystem

/// Why a service operation failed, typed by what failed. Front-ends map it
/// to their own codes in one place each (the socket's in
/// `CacheError+Protocol.swift`); the service counts failed requests to the
/// origin itself (`status().counters.upstreamErrors`), never a store failure.
public enum CacheError: Error, Sendable, CustomStringConvertible {
    /// The origin did not deliver: a transfer failure, an error status, a
    /// feed that is not what docs/protocol.md "Feeds" describes, bytes that
    /// are not an image, a body over max-object-size.
    case origin(OriginFailure)
    /// A feed URL is not configured.
    case notConfigured(setting: String)
    /// The store failed while `doing` something: a full disk, an I/O error,
    /// writes stopped. Never the origin's fault.
    case store(StoreError, doing: String)
    /// What was asked for does not exist (`what` says what and why).
    case notFound(String)
    /// The row exists but its image is not cached, and fetching was not asked for.
    case notCached(row: Int)
    /// The request cannot be served as asked (a malformed argument).
    case invalid(String)
    /// Too much is waiting already (variants for a helper); try again later.
    case busy(String)
    /// The daemon could not do it itself, through no fault of the store or
    /// the origin (a variant helper that failed or cannot start).
    case unavailable(String)
    /// Several failures of one operation (a prefetch's feeds and images).
    indirect case several([CacheError])
    /// A prefetch of both feeds in which one feed failed and the other was
    /// done: what was done (the failed feed's part nil) and why the one failed.
    indirect case partialPrefetch(PrefetchReport, failure: CacheError)

    public var description: String {
        switch self {
        case .origin(let f): return f.description
        case .notConfigured(let setting):
            return "\(setting) is not configured (set \(SettingName.flag(setting)) or \(SettingName.environment(setting)))"
        case let .store(e, doing): return doing.isEmpty ? "\(e)" : "\(doing.cut(toBytes: OriginFailure.quotedSubject)): \(e)"
        case .notFound(let what): return what
        case .notCached(let row): return "row \(row) is not cached"
        case .invalid(let why), .busy(let why), .unavailable(let why): return why
        case .several(let all): return all.map(\.description).joined(separator: "; ")
        case .partialPrefetch(_, let failure): return failure.description
        }
    }

    /// True when the failure is the store's (any of several).
    public var isStoreFailure: Bool {
        switch self {
        case .store: return true
        case .several(let all): return all.contains { $0.isStoreFailure }
        case .partialPrefetch(_, let failure): return failure.isStoreFailure
        default: return false
        }
    }

    /// The failure in a few words for a per-row list, without the row's URL.
    public var reason: String {
        switch self {
        case .origin(let f): return f.reason.cut(toBytes: OriginFailure.quotedReason)
        case .store(let e, _): return "\(e)"
        case .partialPrefetch(_, let failure): return failure.reason
        default: return description
        }
    }
}

/// What the origin did wrong: where, how, and how often it was tried.
public struct OriginFailure: Error, Sendable, CustomStringConvertible {
    /// What was being fetched, as a prefix of the message ("posts-url URL",
    /// "row 3 URL"); the URL alone when nothing more is known.
    public var subject: String
    /// The URL asked for.
    public var url: String
    /// The HTTP status, when the origin answered with an error status.
    public var status: Int?
    /// Attempts made (1 when there was no retry; 0 when nothing was sent).
    public var attempts: Int
    /// What went wrong, without the URL.
    public var reason: String

    public init(subject: String, url: String, status: Int? = nil, attempts: Int = 1, reason: String) {
        self.subject = subject
        self.url = url
        self.status = status
        self.attempts = attempts
        self.reason = reason
    }

    /// A failed transfer or error status from the HTTP client.
    init(subject: String, _ error: FetchError) {
        switch error {
        case let .status(url, code, attempts, _):
            self.init(subject: subject, url: url, status: code, attempts: attempts, reason: error.reason)
        case let .transfer(url, _, attempts):
            self.init(subject: subject, url: url, attempts: attempts, reason: error.reason)
        case let .unsupportedScheme(url), let .rejected(url, _), let .cancelled(url):
            self.init(subject: subject, url: url, attempts: 0, reason: error.reason)
        }
    }

    /// Subject and reason, each cut to a bound (`quotedSubject`,
    /// `quotedReason`) with a marker saying how much was cut: both may
    /// quote what an origin sent (an 8 MiB next URL made an 8 MiB error,
    /// status answer and log line).
    public var description: String {
        subject.isEmpty ? reason.cut(toBytes: Self.quotedReason) : "\(subject.cut(toBytes: Self.quotedSubject)): \(reason.cut(toBytes: Self.quotedReason))"
    }

    /// Bytes of a failure's subject (it holds a URL) kept in messages.
    public static let quotedSubject = 1024
    /// Bytes of a failure's reason kept in messages.
    public static let quotedReason = 2048
}
