import CacheSystem

/// One GET to make.
public struct FetchRequest: Sendable {
    public var url: String
    /// Extra request headers, `Name: value` each (for example conditional ones).
    public var headers: [String]
    /// The largest body accepted (`max-object-size` for an image,
    /// `feed-max-size` for a feed document); a larger announced length is
    /// refused before the body is read. Nil: no limit here.
    public var maxBodySize: Int64?
    /// The setting `maxBodySize` comes from, named when a body passes it.
    public var maxBodySetting: String
    public init(url: String, headers: [String] = [], maxBodySize: Int64? = nil, maxBodySetting: String = "max-object-size") {
        self.url = url
        self.headers = headers
        self.maxBodySize = maxBodySize
        self.maxBodySetting = maxBodySetting
    }
}

/// What the origin answered (the body went to the sink).
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Response headers of the final response, names lowercased.
    public var headers: [String: String]
    public var bodyBytes: Int64
    /// How many attempts it took (1 when no retry was needed).
    public var attempts: Int
    /// The URL that answered: the request's, or the last redirect's target
    /// (a relative link in the answer resolves against it).
    public var url: String

    public init(status: Int, headers: [String: String], bodyBytes: Int64, attempts: Int, url: String) {
        self.status = status
        self.headers = headers
        self.bodyBytes = bodyBytes
        self.attempts = attempts
        self.url = url
    }
}

/// Why a fetch failed, worded for the person reading a failure list.
public enum FetchError: Error, Sendable, CustomStringConvertible, Equatable {
    /// Only http and https are ever fetched.
    case unsupportedScheme(url: String)
    /// The transfer failed (connection, timeout, truncated body, ...).
    case transfer(url: String, message: String, attempts: Int)
    /// The origin answered with an error status; for a 401 or 403, what
    /// the request carried of the configured credentials.
    case status(url: String, code: Int, attempts: Int, credentials: CredentialUse? = nil)
    /// The body sink refused the bytes (too large, not an image, disk full...).
    case rejected(url: String, reason: String)
    /// The client is shutting down.
    case cancelled(url: String)

    public var description: String {
        switch self {
        // A URL is quoted cut (an origin may send megabytes of one).
        case let .unsupportedScheme(url): return "refusing to fetch \(url.cut(toBytes: 1024)): only http and https URLs are fetched"
        case let .transfer(url, message, attempts):
            return "\(url.cut(toBytes: 1024)): \(message)" + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case .status(let url, _, _, _):
            return "\(url.cut(toBytes: 1024)): \(reason)"
        case let .rejected(url, reason): return "\(url.cut(toBytes: 1024)): \(reason)"
        case let .cancelled(url): return "\(url.cut(toBytes: 1024)): cancelled, the daemon is stopping"
        }
    }

    /// The short reason without the URL, for per-row failure lists.
    public var reason: String {
        switch self {
        case .unsupportedScheme: return "not an http or https URL"
        case let .transfer(_, message, attempts): return message + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .status(_, code, attempts, credentials):
            return TransferFailure.status(code, credentials: credentials) + (attempts > 1 ? " (after \(attempts) attempts)" : "")
        case let .rejected(_, reason): return reason
        case .cancelled: return "cancelled, the daemon is stopping"
        }
    }
}

/// Where a response body goes, chunk by chunk, on the fetch thread.
public protocol BodySink: AnyObject, Sendable {
    /// Takes the next chunk; throwing aborts the transfer with that reason.
    func receive(_ bytes: UnsafeRawBufferPointer) throws
    /// Forgets everything received, before a retry.
    func reset() throws
    /// Told, before the first chunk, the body's length as the response's
    /// `Content-Length` gives it (when it does); throwing aborts the transfer.
    func expect(length: Int64) throws
}

extension BodySink {
    /// By default the announced length is not needed.
    public func expect(length: Int64) throws {}
}

/// A body grew past its sink's limit.
public struct BodyTooLarge: Error, CustomStringConvertible {
    public var limit: Int
    /// The setting the limit comes from (`max-object-size`, `feed-max-size`).
    public var setting = "max-object-size"
    public var description: String { "larger than \(setting) \(formatSize(Int64(limit)))" }
}

/// Retry, timeout and redirect settings; each default is what the daemon uses.
public struct FetchPolicy: Sendable, Equatable {
    /// Retries after the first attempt for connection errors, timeouts and 5xx. Default 3.
    public var retries = 3
    /// First backoff delay, doubled each retry, with ±50% jitter. Default 0.25 s.
    public var backoffBase = Duration.milliseconds(250)
    /// Longest wait for a connection. Default 10 s.
    public var connectTimeout = Duration.seconds(10)
    /// Longest a whole transfer may take. Default 300 s.
    public var totalTimeout = Duration.seconds(300)
    /// A transfer slower than 1 byte/s for this long is aborted (libcurl
    /// counts whole seconds). Default 30 s.
    public var lowSpeedTime = Duration.seconds(30)
    /// Redirects followed, each to http or https only. Default 5.
    public var maxRedirects = 5
    /// Parallel transfers. Default 8.
    public var concurrency = 8
    /// Sent as `User-Agent`.
    public var userAgent = "cached"
    /// A PEM file of CA certificates to trust besides the system's
    /// (libcurl's CAINFO). Nil: the system store.
    public var caFile: String?
    /// A directory of hashed CA certificates (`openssl rehash`) to trust
    /// besides the system's (libcurl's CAPATH). Nil: the system store.
    public var caPath: String?
    /// The proxy every request goes through (`http://host:port`,
    /// `socks5h://...`). Nil: libcurl's environment variables decide
    /// (`http_proxy`, `https_proxy`, `all_proxy`; uppercase `HTTP_PROXY` is
    /// ignored). Empty: no proxy at all, whatever the environment says.
    public var proxy: String?
    /// Hosts reached without the proxy: a comma-separated list of host
    /// names, domains, addresses or CIDR ranges, or `*`. Nil: `no_proxy`
    /// from the environment.
    public var noProxy: String?

    public init() {}
}
