import CacheProtocol
import CacheFetch
import CacheStore
import CacheSystem

/// What revalidating each feed may send.
struct FeedRevalidation: Sendable {
    /// Feeds whose URL changed (a reload): their stored validators belong to
    /// the old URL, so the next fetch sends none.
    var unvalidated: Set<Feed> = []
    /// Feeds whose origin answered `If-None-Match` with a full 200 carrying
    /// the very ETag that was sent: it cannot match its own tags (Apache's
    /// mod_deflate appends `-gzip` to the ETag and then does not recognise
    /// it, Apache bug 45023). For these only Last-Modified is sent, so the
    /// next refresh is answered 304 instead of downloading the feed again;
    /// the store keeps the mark (`Validators.etagIgnored`) across restarts.
    var unmatchedETags: Set<Feed> = []

    mutating func urlChanged(_ feed: Feed) {
        unvalidated.insert(feed)
        unmatchedETags.remove(feed)
    }
}

/// Feed refreshes: conditional requests, decoding, storing (docs/protocol.md, "Feeds").
extension CacheService {
    /// The validators a conditional request for `feed` sends (none with
    /// `force`, or after its URL changed).
    private func validatorsToSend(_ feed: Feed, force: Bool) -> Validators {
        let changedURL = revalidation.withLock { $0.unvalidated.remove(feed) != nil }
        guard !force, !changedURL else { return Validators() }
        // The store keeps only safe values; checked again here because a
        // value that ends a header line would split the request.
        let pages = feed == .posts ? store.postPages : store.manifestPages
        return (pages.first?.validators ?? Validators()).sanitized
    }

    private static func conditionalHeaders(_ v: Validators) -> [String] {
        var h: [String] = []
        if let e = v.etag, !v.etagIgnored { h.append("If-None-Match: \(e)") }
        if let m = v.lastModified { h.append("If-Modified-Since: \(m)") }
        return h
    }

    /// What to store from a full answer to a request that sent `sent`.
    private func validatorsToStore(_ feed: Feed, setting: String, sent: Validators, response: HTTPResponse) -> Validators {
        var v = Validators(etag: response.headers["etag"], lastModified: response.headers["last-modified"])
        // A 304 rightly echoes the ETag; only a full answer to it is the fault.
        if response.status != 304, let tag = sent.etag, tag == v.etag, v.lastModified != nil {
            let first = revalidation.withLock { $0.unmatchedETags.insert(feed).inserted }
            if first {
                log.notice("\(setting) answered If-None-Match \(tag) with a full 200 and the same ETag; using Last-Modified alone for it from now on")
            }
        }
        let ignored = revalidation.withLock { r -> Bool in
            if sent.etagIgnored { r.unmatchedETags.insert(feed) }
            return r.unmatchedETags.contains(feed)
        }
        if v.lastModified != nil, ignored { v.etag = Validators.ignoredETag }
        return v
    }

    /// An origin failure, counted as one.
    func originFailure(_ f: OriginFailure) -> CacheError {
        counters.withLock { $0.upstreamErrors += 1 }
        return .origin(f)
    }

    /// One feed: its setting's name, its URL now, and where its state lives.
    struct FeedFetch: Sendable {
        var setting: String
        var url: String?
        var feed: Feed
    }

    /// Fetches a feed body into memory and hands it to `process` on a worker.
    private func fetchFeed(_ f: FeedFetch, force: Bool,
                           process: @escaping @Sendable (HTTPResponse, [UInt8], Validators) throws(CacheError) -> Void,
                           failed: @escaping @Sendable (CacheError) -> Void) {
        // Even this answer comes from a worker: a completion never runs on
        // the caller's thread (the contract of `Outcome.later`).
        guard let url = f.url else { pool.submit { failed(.notConfigured(setting: f.setting)) }; return }
        let limit = Int(feeds.withLock { $0.maxObjectSize })
        let sink = MemorySink(limit: limit)
        let sent = validatorsToSend(f.feed, force: force)
        let request = HTTPRequest(url: url, headers: Self.conditionalHeaders(sent), maxBodySize: Int64(limit))
        http.fetch(request, into: sink) { [self] result in
            pool.submit { [self] in
                switch result {
                case .failure(let e):
                    failed(originFailure(OriginFailure(subject: "\(f.setting) \(url)", e)))
                case .success(let response):
                    let keep = validatorsToStore(f.feed, setting: f.setting, sent: sent, response: response)
                    do throws(CacheError) { try process(response, sink.bytes, keep) } catch { failed(error) }
                }
            }
        }
    }

    /// A feed body that is not what docs/protocol.md "Feeds" describes.
    private func badFeed(_ f: FeedFetch, _ response: HTTPResponse, _ error: JSONError) -> CacheError {
        originFailure(OriginFailure(subject: "\(f.setting) \(f.url ?? "")", url: f.url ?? "", attempts: response.attempts, reason: "\(error)"))
    }

    /// Refreshes the posts (joins a refresh already running).
    func refreshPosts(force: Bool, completion: @escaping @Sendable (Result<PostsSummary, CacheError>) -> Void) {
        guard postsFlight.join(0, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let f = FeedFetch(setting: "posts-url", url: feeds.withLock { $0.postsURL }, feed: .posts)
        fetchFeed(f, force: force, process: { [self] response, body, validators throws(CacheError) in
            let summary: PostsSummary
            do throws(CacheError) { summary = try storePosts(f, response, body, validators) } catch {
                if body.count >= Memory.largeBody { Memory.returnFreePages() }
                throw error
            }
            // Before the answer: whoever asked sees the memory the refresh leaves.
            if body.count >= Memory.largeBody { Memory.returnFreePages() }
            postsFlight.finish(0, .success(summary))
        }, failed: { [self] error in postsFlight.finish(0, .failure(error)) })
    }

    private func storePosts(_ f: FeedFetch, _ response: HTTPResponse, _ body: [UInt8], _ validators: Validators) throws(CacheError) -> PostsSummary {
        if response.status == 304 {
            let unchanged = store.posts(offset: 0, limit: 0).total
            log.info("posts feed not modified (\(unchanged) posts)")
            return PostsSummary(unchanged: unchanged)
        }
        let decoded: DecodedPosts
        do throws(JSONError) { decoded = try FeedDecoder.posts(body) } catch { throw badFeed(f, response, error) }
        for p in decoded.problems.prefix(Self.loggedFeedProblems) { log.warning("posts feed: skipped \(p)") }
        let change: PostsChange
        // One page of unknown URL, as before paged feeds (issue 23 replaces it).
        let posts = decoded.posts.map { (id: PostID.int($0.id), json: $0.json) }
        let pages = [FeedPage(url: "", validators: validators, count: posts.count)]
        do throws(StoreError) { change = try store.replacePosts(posts, pages: pages) }
        catch { throw .store(error, doing: "could not store posts") }
        let summary = PostsSummary(fetched: change.fetched, unchanged: change.unchanged, removed: change.removed, invalid: decoded.invalid)
        log.info("posts refreshed: \(summary.fetched) new or changed, \(summary.unchanged) unchanged, \(summary.removed) removed, \(summary.invalid) invalid")
        return summary
    }

    /// A feed with thousands of bad entries logs the first 20: enough to see
    /// the pattern, not enough to flood the journal.
    static let loggedFeedProblems = 20

    /// Refreshes the image manifest (joins a refresh already running).
    /// Succeeds with the number of rows.
    func refreshManifest(force: Bool, completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        guard manifestFlight.join(0, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let f = FeedFetch(setting: "images-url", url: feeds.withLock { $0.imagesURL }, feed: .manifest)
        fetchFeed(f, force: force, process: { [self] response, body, validators throws(CacheError) in
            defer { if body.count >= Memory.largeBody { Memory.returnFreePages() } }
            if response.status == 304 {
                manifestFlight.finish(0, .success(store.rows(offset: 0, limit: 0).total))
                return
            }
            let entries: [ManifestEntry]
            do throws(JSONError) { entries = try FeedDecoder.manifest(body) } catch { throw badFeed(f, response, error) }
            do throws(StoreError) {
                let pages = [FeedPage(url: "", validators: validators, count: entries.count)]
                let changed = try store.replaceManifest(entries.map { ($0.url, $0.description) }, pages: pages)
                log.info("manifest refreshed: \(entries.count) rows, \(changed) changed")
            } catch { throw .store(error, doing: "could not store the manifest") }
            manifestFlight.finish(0, .success(entries.count))
        }, failed: { [self] error in manifestFlight.finish(0, .failure(error)) })
    }

    /// Calls `completion` once the manifest is known, fetching it if it never was.
    func ensureManifest(_ completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        if store.manifestKnown { completion(.success(store.rows(offset: 0, limit: 0).total)); return }
        refreshManifest(force: false, completion: completion)
    }
}
