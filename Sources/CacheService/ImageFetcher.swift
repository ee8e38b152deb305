import CacheFetch
import CacheStore
import CacheSystem

/// A stale image to revalidate: the object its rows map and the validators
/// to send for it.
struct Revalidation: Sendable {
    var ref: ObjectRef
    var freshness: ImageFreshness?
}

/// What a fetch of an image URL came to.
struct FetchedImage: Sendable {
    /// The object the URL's rows now map.
    var ref: ObjectRef
    /// The origin answered 304: nothing was downloaded.
    var notModified: Bool
}

/// Fetches images (docs/architecture.md, "The write path"), a component
/// that owns what of it lasts between fetches: the single flight of each
/// URL and the failures of each (`RowFailures`: `last_error` and backoff).
/// One transfer per URL at a time, its result committed and remembered.
/// It reaches the store through `ImageStore` and the network through
/// `ImageTransfers`, so it is tested alone (`ImageFetcherTests`).
final class ImageFetcher: Sendable {
    private let store: any ImageStore
    private let transfers: any ImageTransfers
    private let onWorker: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// Runs a finished transfer's commit (CacheService: the commit threads).
    private let onCommit: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let log: Logger
    /// The largest object the store takes and the free space kept (the feeds' settings, which a reload changes).
    private let bounds: @Sendable () -> (maxObjectSize: Int64, minFreeSpace: Int64)
    /// Counts into the service's counters.
    private let count: @Sendable (@Sendable (inout CounterValues) -> Void) -> Void
    private let flight = SingleFlight<String, Result<FetchedImage, CacheError>>()
    /// Each failing image URL's last failure and how often in a row (RowFailures.swift).
    private let failures = Locked(RowFailures())

    init(store: any ImageStore, transfers: any ImageTransfers, log: Logger,
         onWorker: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
         onCommit: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
         bounds: @escaping @Sendable () -> (maxObjectSize: Int64, minFreeSpace: Int64),
         count: @escaping @Sendable (@Sendable (inout CounterValues) -> Void) -> Void) {
        self.store = store
        self.transfers = transfers
        self.log = log
        self.onWorker = onWorker
        self.onCommit = onCommit
        self.bounds = bounds
        self.count = count
    }

    /// Why `url` last failed, since it last succeeded.
    func lastError(_ url: String) -> RowError? { failures.withLock { $0.lastError(url) } }

    /// The failures of the URLs in `urls` (the others are forgotten: no row names them).
    func failures(keeping urls: Set<String>) -> RowFailures {
        failures.withLock { f in
            f.keep(only: urls)
            return f
        }
    }

    /// Notes a failure of a row that was never fetched (its URL cannot be).
    func failed(_ url: String, _ error: RowError) { failures.withLock { $0.failed(url, error) } }

    /// Downloads the image at `url`, or with `revalidating` asks for a stale
    /// object conditionally (a 304 keeps it, its rows' freshness logged; a
    /// 200 is stored and remaps the rows), once however many callers ask at
    /// the same time: a caller joining a flight already running gets its
    /// result (a conditional request joins a download, never the reverse).
    /// The rows mapped are those `rows` gives
    /// for the URL when the transfer ends (the manifest as it is then).
    func fetch(url: String, revalidating: Revalidation?, rows: @escaping @Sendable (String) -> [(row: Int, url: String)],
               completion: @escaping @Sendable (Result<FetchedImage, CacheError>) -> Void) {
        // A conditional request joins an unconditional download of the URL
        // that is running (it gets the current bytes); an unconditional one
        // never joins a conditional one, whose 304 would not be the download
        // it asked for (`prefetch --force` during a prefetch).
        let key = revalidating == nil ? url : "?" + url
        if revalidating != nil, flight.joinIfRunning(url, completion) { count { $0.coalesced += 1 }; return }
        guard flight.join(key, completion) else { count { $0.coalesced += 1 }; return }
        let (maxSize, headroom) = bounds()
        // Under min-free-space nothing is asked of the origin: the room left is the posts' and the log's.
        do throws(StoreError) { try store.checkHeadroom(headroom, needed: 0) } catch {
            let refused = CacheError.store(error, doing: "")
            log.warning("image \(url.hidingURLPassword.cut(toBytes: 1024)) not downloaded: \(error)")
            onWorker { [self] in flight.finish(key, .failure(refused)) }
            return
        }
        // The temp file is opened when the first byte arrives, not when the
        // download is queued: a prefetch of 10,000 URLs holds at most
        // `concurrency` open files, not one per queued row. A download in
        // flight counts: its bytes are on the disk, so one that takes the
        // free space under the headroom is refused once its Content-Length
        // says so, stopped while it streams (`ObjectSink`) or not committed.
        let sink = ObjectSink(headroom: { [store] needed throws(StoreError) in try store.checkHeadroom(headroom, needed: needed) }) { [store] () throws(StoreError) in
            try store.newObjectWriter(maxSize: maxSize)
        }
        let sent = revalidating?.freshness?.validators ?? Validators()
        let request = FetchRequest(url: url, headers: Self.imageConditionalHeaders(sent), maxBodySize: maxSize)
        // An answer (200 or 304) is committed on a commit thread: its fsyncs
        // overlap with the other transfers' (ServiceConfiguration.commitThreads).
        // A failure has nothing to sync and goes to a worker, as everything
        // does once the transfers are cancelled at shutdown (CacheService.shutdown
        // stops the commit threads before the workers).
        transfers.fetch(request, into: sink) { [self] result in
            var run = onWorker
            if case .success = result { run = onCommit }
            run { [self] in
                let outcome = commit(url, result, sink, revalidating: revalidating, sent: sent, rows: rows(url), headroom: headroom)
                noteOutcome(url, outcome)
                flight.finish(key, outcome)
            }
        }
    }

    /// `If-None-Match` and `If-Modified-Since` for the stored validators (none for none).
    static func imageConditionalHeaders(_ v: Validators) -> [String] {
        var h: [String] = []
        if let e = v.etag { h.append("If-None-Match: \(e)") }
        if let m = v.lastModified { h.append("If-Modified-Since: \(m)") }
        return h
    }

    /// Remembers a failure (for `last_error` and backoff) or forgets the
    /// URL's failures after a success.
    private func noteOutcome(_ url: String, _ outcome: Result<FetchedImage, CacheError>) {
        switch outcome {
        case .success: failures.withLock { $0.succeeded(url) }
        case .failure(let e):
            if case .origin = e { count { $0.upstreamErrors += 1 } }
            log.warning("image \(url.hidingURLPassword.cut(toBytes: 1024)) failed: \(e.reason)")
            if e.reason == FetchError.cancelled(url: url).reason { return }  // the daemon is stopping: not the row's failure
            // The store's failures (a full disk, min-free-space) are not the
            // row's: no last_error, no backoff; the next prefetch tries again.
            guard case .origin = e else { return }
            var status: Int?
            if case .origin(let f) = e { status = f.status }
            let error = RowError(time: Double(Clock.wallMilliseconds()) / 1000, reason: e.reason, status: status)
            failures.withLock { $0.failed(url, error) }
        }
    }

    /// Stores a finished fetch (on a commit thread; a failed one on a worker).
    private func commit(_ url: String, _ result: Result<HTTPResponse, FetchError>, _ sink: ObjectSink,
                        revalidating: Revalidation?, sent: Validators, rows: [(row: Int, url: String)],
                        headroom: Int64) -> Result<FetchedImage, CacheError> {
        let response: HTTPResponse
        switch result {
        case .failure(let e):
            sink.discard()
            // The sink's own failure (a full disk while streaming) is the store's, not the origin's.
            if let refused = sink.failure { return .failure(Self.classify(refused, url: url)) }
            return .failure(.origin(OriginFailure(subject: url, e)))
        case .success(let r):
            response = r
        }
        let now = Clock.wallMilliseconds()
        if response.status == 304 {
            sink.discard()
            guard let revalidating, sent.etag != nil || sent.lastModified != nil else {
                return .failure(.origin(OriginFailure(subject: url, url: url, status: 304, attempts: response.attempts,
                                                      reason: "answered 304 Not Modified to a request that sent no validators")))
            }
            // Evicted or collected while the request was out: a 304 has no
            // bytes to put back. Not the row's fault; the next prefetch downloads it.
            guard store.objectRef(revalidating.ref.hash) != nil, store.objectIsPresent(revalidating.ref) else {
                return .failure(.store(.missingObject(revalidating.ref.hash, rows: rows.map(\.row)),
                                       doing: "revalidating \(url), whose copy was removed meanwhile (the next prefetch downloads it)"))
            }
            let freshness = FreshnessHeaders.refreshed(revalidating.freshness, by: response.headers, now: now)
            // A no-cache answer restated as it was is stale whenever it came:
            // nothing to log (5,000 no-cache rows would log 5,000 records a prefetch).
            let same = freshness.lifetime == .noCache && revalidating.freshness.map {
                $0.lifetime == .noCache && $0.validators == freshness.validators
            } == true
            if !same {
                do throws(StoreError) {
                    try store.refreshFreshness(revalidating.ref, rows: rows, freshness: freshness)
                } catch { return .failure(.store(error, doing: "")) }
            }
            log.debug("revalidated \(url): 304, \(revalidating.ref.hash) kept")
            return .success(FetchedImage(ref: revalidating.ref, notModified: true))
        }
        do throws(StoreError) {
            let writer = try sink.finishedWriter()
            do throws(StoreError) { try store.checkHeadroom(headroom, needed: 0) } catch {
                writer.discard()
                throw error
            }
            // Whether the bytes are an image depends on the bytes alone, so
            // every server gets the same answer; the declared type only
            // appears in a refusal's message.
            let ref = try store.commitObject(writer, rows: rows, declaredContentType: response.headers["content-type"],
                                             freshness: FreshnessHeaders.freshness(response.headers, now: now))
            count { $0.downloads += 1; $0.downloadBytes += ref.size }
            log.debug("downloaded \(url): \(ref.size) bytes, \(ref.hash)")
            return .success(FetchedImage(ref: ref, notModified: false))
        } catch {
            return .failure(Self.classify(error, url: url, attempts: response.attempts))
        }
    }

    /// Bytes the store refused because of what they are (not an image, too
    /// large) are the origin's fault; anything else is the store's.
    static func classify(_ error: StoreError, url: String, attempts: Int = 1) -> CacheError {
        switch error {
        case .notAnImage, .tooLarge: return .origin(OriginFailure(subject: url, url: url, attempts: attempts, reason: "\(error)"))
        default: return .store(error, doing: "")
        }
    }
}
