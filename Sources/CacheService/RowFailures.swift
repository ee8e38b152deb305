import CacheSystem

/// A row's last failure, as `list_images` and `get_image` give it (`last_error`).
public struct RowError: Sendable, Equatable {
    /// When it failed, unix seconds.
    public var time: Double
    /// Why, without the URL (`HTTP 404 Not Found`, `not an image: ...`).
    public var reason: String
    /// The origin's HTTP status, when it answered with an error status.
    public var status: Int?

    public init(time: Double, reason: String, status: Int? = nil) {
        self.time = time
        self.reason = reason
        self.status = status
    }
}

/// The failures of image URLs since each last succeeded, in memory only
/// (a restart forgets them): what `last_error` shows and what decides a
/// failing row's backoff (docs/operations.md, "Image freshness and failures").
struct RowFailures: Sendable {
    struct History: Sendable {
        var last: RowError
        /// Failures in a row, since the URL last succeeded.
        var consecutive: Int
    }

    private(set) var byURL: [String: History] = [:]

    /// Notes a failure of `url` (the URL fetched, or the row's URL as written when it cannot be).
    mutating func failed(_ url: String, _ error: RowError) {
        byURL[url] = History(last: error, consecutive: (byURL[url]?.consecutive ?? 0) + 1)
    }

    /// `url` succeeded: its failures are forgotten.
    mutating func succeeded(_ url: String) { byURL[url] = nil }

    /// Forgets the URLs no row names any more.
    mutating func keep(only urls: Set<String>) {
        if byURL.keys.contains(where: { !urls.contains($0) }) { byURL = byURL.filter { urls.contains($0.key) } }
    }

    func lastError(_ url: String) -> RowError? { byURL[url]?.last }

    /// Whether a prefetch at `now` (unix seconds) skips `url`: it failed
    /// N times in a row and `backoff(N)` has not passed since the last.
    func inBackoff(_ url: String, now: Double) -> Bool {
        guard let h = byURL[url] else { return false }
        return now < h.last.time + Self.backoff(consecutive: h.consecutive).inSeconds
    }

    /// How long a row that failed `n` times in a row waits before a
    /// prefetch tries it again: not at all after one failure (the next
    /// prefetch retries it), then 2, 4, 8 ... minutes (2^(n-1)), at most a day.
    static func backoff(consecutive n: Int) -> Duration {
        guard n >= 2 else { return .zero }
        return min(.seconds(60 * (1 << min(n - 1, 20))), .seconds(86400))
    }
}
