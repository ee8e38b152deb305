import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// What a posts refresh did (the `posts` object of a prefetch answer).
struct PostsSummary: Sendable {
    var fetched = 0, unchanged = 0, removed = 0, invalid = 0
}

/// What an images prefetch did (the `images` object and `failures`).
struct ImagesSummary: Sendable {
    var downloaded = 0, cached = 0, failed = 0
    var bytes: Int64 = 0
    var failures: [(row: Int, url: String, error: String)] = []
}

/// A download that did not produce an image, in words for the failure list.
struct ImageFailure: Error, Sendable {
    var message: String
}

/// Progress of a prefetch phase.
struct Progress: Sendable {
    var phase: String
    var done: Int
    var total: Int
    var bytes: Int64
}

/// The daemon's operations on the store and the origin: feed refreshes,
/// single-flight downloads, read-through, prefetch and maintenance.
/// Completions run on worker or fetch threads; none blocks the event loop.
final class CacheService: Sendable {
    let store: Store
    let http: HTTPClient
    let pool: WorkerPool
    let log: Logger
    let counters: Counters
    let settings: Locked<Settings>

    private let postsFlight = SingleFlight<Int, Result<PostsSummary, ProtocolError>>()
    private let manifestFlight = SingleFlight<Int, Result<Int, ProtocolError>>()
    private let imageFlight = SingleFlight<String, Result<ObjectRef, ImageFailure>>()

    init(store: Store, http: HTTPClient, pool: WorkerPool, log: Logger, counters: Counters, settings: Settings) {
        self.store = store
        self.http = http
        self.pool = pool
        self.log = log
        self.counters = counters
        self.settings = Locked(settings)
    }

    var baseURL: String? {
        settings.withLock { FeedDecoder.baseURL(imagesURL: $0.imagesURL, imagesBaseURL: $0.imagesBaseURL) }
    }

    /// The manifest's URLs resolved once per manifest change: per row, and
    /// rows by URL (several rows may name one URL).
    struct ManifestView: Sendable {
        var generation: Int
        var base: String?
        /// The URL of each row as written in the manifest.
        var written: [String]
        /// The absolute URL of each row, nil when it has none that may be fetched.
        var resolved: [String?]
        var rowsByURL: [String: [Int]]
    }
    private let view = Locked<ManifestView?>(nil)

    func manifestView() -> ManifestView {
        let generation = store.manifestGeneration
        let base = baseURL
        if let v = view.withLock({ $0 }), v.generation == generation, v.base == base { return v }
        let rows = store.rows(offset: 0, limit: Int.max).page
        var memo: [String: String?] = [:]
        var v = ManifestView(generation: generation, base: base, written: [], resolved: [], rowsByURL: [:])
        v.written.reserveCapacity(rows.count)
        v.resolved.reserveCapacity(rows.count)
        for (i, row) in rows.enumerated() {
            let r: String?
            if let m = memo[row.url] { r = m } else { r = FeedDecoder.resolve(row.url, base: base); memo[row.url] = r }
            v.written.append(row.url)
            v.resolved.append(r)
            if let r { v.rowsByURL[r, default: []].append(i) }
        }
        view.withLock { $0 = v }
        return v
    }

    /// The absolute URL of row `index`, or nil when it has none that may be fetched.
    func resolvedURL(at index: Int) -> String? {
        let v = manifestView()
        return v.resolved.indices.contains(index) ? v.resolved[index] : nil
    }

    // MARK: Feeds

    /// Feeds whose URL changed (SIGHUP): their stored validators belong to the
    /// old URL, so the next fetch sends none.
    private let unvalidated = Locked<Set<Feed>>([])

    /// Applies reloaded settings that can change at run time: the URLs and
    /// max-object-size. Returns what changed, as "key old -> new".
    func reload(_ new: Settings) -> [String] {
        settings.withLock { s -> [String] in
            var changes: [String] = []
            func note(_ key: String, _ old: String?, _ value: String?) {
                if old != value { changes.append("\(key) \(old ?? "-") -> \(value ?? "-")") }
            }
            note("posts-url", s.postsURL, new.postsURL)
            note("images-url", s.imagesURL, new.imagesURL)
            note("images-base-url", s.imagesBaseURL, new.imagesBaseURL)
            note("max-object-size", String(s.maxObjectSize), String(new.maxObjectSize))
            if s.postsURL != new.postsURL { unvalidated.withLock { _ = $0.insert(.posts) }; unmatchedETags.withLock { _ = $0.remove(.posts) } }
            if s.imagesURL != new.imagesURL { unvalidated.withLock { _ = $0.insert(.manifest) }; unmatchedETags.withLock { _ = $0.remove(.manifest) } }
            s.postsURL = new.postsURL
            s.imagesURL = new.imagesURL
            s.imagesBaseURL = new.imagesBaseURL
            s.maxObjectSize = new.maxObjectSize
            return changes
        }
    }

    /// The validators a conditional request for `feed` sends (none with
    /// `force`, or after its URL changed).
    private func validatorsToSend(_ feed: Feed, force: Bool) -> Validators {
        let changedURL = unvalidated.withLock { $0.remove(feed) != nil }
        guard !force, !changedURL else { return Validators() }
        // The store keeps only safe values; checked again here because a
        // value that ends a header line would split the request.
        return store.validators(for: feed).sanitized
    }

    private static func conditionalHeaders(_ v: Validators) -> [String] {
        var h: [String] = []
        if let e = v.etag, !v.etagIgnored { h.append("If-None-Match: \(e)") }
        if let m = v.lastModified { h.append("If-Modified-Since: \(m)") }
        return h
    }

    /// Feeds whose origin answered `If-None-Match` with a full 200 carrying
    /// the very ETag that was sent: it cannot match its own tags (Apache's
    /// mod_deflate appends `-gzip` to the ETag and then does not recognise
    /// it, Apache bug 45023). For these only Last-Modified is sent, so the
    /// next refresh is answered 304 instead of downloading the feed again;
    /// the store keeps the mark (`Validators.etagIgnored`) across restarts.
    private let unmatchedETags = Locked<Set<Feed>>([])

    /// What to store from a full answer to a request that sent `sent`.
    private func validatorsToStore(_ feed: Feed, sent: Validators, response: HTTPResponse) -> Validators {
        var v = Validators(etag: response.headers["etag"], lastModified: response.headers["last-modified"])
        // A 304 rightly echoes the ETag; only a full answer to it is the fault.
        if response.status != 304, let tag = sent.etag, tag == v.etag, v.lastModified != nil {
            let first = unmatchedETags.withLock { $0.insert(feed).inserted }
            if first {
                log.notice("\(feed == .posts ? "posts-url" : "images-url") answered If-None-Match \(tag) with a full 200 and the same ETag; using Last-Modified alone for it from now on")
            }
        }
        if sent.etagIgnored { unmatchedETags.withLock { _ = $0.insert(feed) } }
        if v.lastModified != nil, unmatchedETags.withLock({ $0.contains(feed) }) { v.etag = Validators.ignoredETag }
        return v
    }

    /// Fetches a feed body into memory and hands it to `process` on a worker.
    private func fetchFeed(name: String, url: String?, feed: Feed, force: Bool,
                           process: @escaping @Sendable (HTTPResponse, [UInt8], Validators) throws(ProtocolError) -> Void,
                           failed: @escaping @Sendable (ProtocolError) -> Void) {
        guard let url else {
            failed(ProtocolError(.upstream, "\(name) is not configured (set --\(name) or CACHED_\(name.uppercased().replacing("-", with: "_")))"))
            return
        }
        let limit = Int(settings.withLock { $0.maxObjectSize })
        let sink = MemorySink(limit: limit)
        let sent = validatorsToSend(feed, force: force)
        let request = HTTPRequest(url: url, headers: Self.conditionalHeaders(sent), maxBodySize: Int64(limit))
        http.fetch(request, into: sink) { [self] result in
            pool.submit { [self] in
                switch result {
                case .failure(let e):
                    counters.withLock { $0.upstreamErrors += 1 }
                    failed(ProtocolError(.upstream, "\(name) \(url): \(e.reason)"))
                case .success(let response):
                    let keep = validatorsToStore(feed, sent: sent, response: response)
                    do throws(ProtocolError) { try process(response, sink.bytes, keep) } catch { failed(error) }
                }
            }
        }
    }

    /// Refreshes the posts (joins a refresh already running).
    func refreshPosts(force: Bool, completion: @escaping @Sendable (Result<PostsSummary, ProtocolError>) -> Void) {
        guard postsFlight.join(0, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let url = settings.withLock { $0.postsURL }
        fetchFeed(name: "posts-url", url: url, feed: .posts, force: force, process: { [self] response, body, validators throws(ProtocolError) in
            var summary = PostsSummary()
            if response.status == 304 {
                summary.unchanged = store.posts(offset: 0, limit: 0).total
                log.info("posts feed not modified (\(summary.unchanged) posts)")
                postsFlight.finish(0, .success(summary))
                return
            }
            let decoded: DecodedPosts
            do { decoded = try FeedDecoder.posts(body) } catch {
                counters.withLock { $0.upstreamErrors += 1 }
                throw ProtocolError(.upstream, "posts-url \(url ?? ""): \(error)")
            }
            for p in decoded.problems.prefix(20) { log.warning("posts feed: skipped \(p)") }
            let change: PostsChange
            do {
                change = try store.replacePosts(decoded.posts, validators: validators)
            } catch { throw ProtocolError(.internal, "could not store posts: \(error)") }
            summary = PostsSummary(fetched: change.fetched, unchanged: change.unchanged, removed: change.removed, invalid: decoded.invalid)
            log.info("posts refreshed: \(summary.fetched) new or changed, \(summary.unchanged) unchanged, \(summary.removed) removed, \(summary.invalid) invalid")
            postsFlight.finish(0, .success(summary))
        }, failed: { [self] error in postsFlight.finish(0, .failure(error)) })
    }

    /// Refreshes the image manifest (joins a refresh already running).
    /// Succeeds with the number of rows.
    func refreshManifest(force: Bool, completion: @escaping @Sendable (Result<Int, ProtocolError>) -> Void) {
        guard manifestFlight.join(0, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let url = settings.withLock { $0.imagesURL }
        fetchFeed(name: "images-url", url: url, feed: .manifest, force: force, process: { [self] response, body, validators throws(ProtocolError) in
            if response.status == 304 {
                manifestFlight.finish(0, .success(store.rows(offset: 0, limit: 0).total))
                return
            }
            let entries: [ManifestEntry]
            do { entries = try FeedDecoder.manifest(body) } catch {
                counters.withLock { $0.upstreamErrors += 1 }
                throw ProtocolError(.upstream, "images-url \(url ?? ""): \(error)")
            }
            do {
                let changed = try store.replaceManifest(entries.map { ($0.url, $0.description) }, validators: validators)
                log.info("manifest refreshed: \(entries.count) rows, \(changed) changed")
            } catch { throw ProtocolError(.internal, "could not store the manifest: \(error)") }
            manifestFlight.finish(0, .success(entries.count))
        }, failed: { [self] error in manifestFlight.finish(0, .failure(error)) })
    }

    /// Calls `completion` once the manifest is known, fetching it if it never was.
    func ensureManifest(_ completion: @escaping @Sendable (Result<Int, ProtocolError>) -> Void) {
        if store.manifestKnown { completion(.success(store.rows(offset: 0, limit: 0).total)); return }
        refreshManifest(force: false, completion: completion)
    }

    // MARK: Images

    /// Downloads the image at `url` once, however many callers ask at the same
    /// time, and maps every row with that URL to the stored object.
    func download(url: String, completion: @escaping @Sendable (Result<ObjectRef, ImageFailure>) -> Void) {
        guard imageFlight.join(url, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let maxSize = settings.withLock { $0.maxObjectSize }
        // The temp file is opened when the first byte arrives, not when the
        // download is queued: a prefetch of 10,000 URLs holds at most
        // `concurrency` open files, not one per queued row.
        let sink = ObjectSink { [store] () throws(StoreError) in try store.newObjectWriter(maxSize: maxSize) }
        http.fetch(HTTPRequest(url: url, maxBodySize: maxSize), into: sink) { [self] result in
            pool.submit { [self] in
                let outcome: Result<ObjectRef, ImageFailure>
                switch result {
                case .failure(let e):
                    sink.discard()
                    outcome = .failure(ImageFailure(message: e.reason))
                case .success(let response):
                    let writer: ObjectWriter
                    do { writer = try sink.finishedWriter() } catch {
                        outcome = .failure(ImageFailure(message: "\(error)"))
                        break
                    }
                    let v = manifestView()
                    let rows = (v.rowsByURL[url] ?? []).map { (row: $0, url: v.written[$0]) }
                    // Whether the bytes are an image depends on the bytes alone, so
                    // every server gets the same answer; the declared type only
                    // appears in a refusal's message.
                    do {
                        let ref = try store.commitObject(writer, rows: rows, declaredContentType: response.headers["content-type"])
                        counters.withLock { $0.downloads += 1; $0.downloadBytes += ref.size }
                        log.debug("downloaded \(url): \(ref.size) bytes, \(ref.hash)")
                        outcome = .success(ref)
                    } catch {
                        outcome = .failure(ImageFailure(message: "\(error)"))
                    }
                }
                if case .failure(let f) = outcome {
                    counters.withLock { $0.upstreamErrors += 1 }
                    log.warning("image \(url) failed: \(f.message)")
                }
                imageFlight.finish(url, outcome)
            }
        }
    }

    /// The cached object of `row`, downloading it on a miss when `fetch` is true.
    func image(row index: Int, fetch: Bool, completion: @escaping @Sendable (Result<(Row, ObjectRef), ProtocolError>) -> Void) {
        ensureManifest { [self] manifest in
            if case .failure(let e) = manifest { completion(.failure(e)); return }
            guard let row = store.row(index) else {
                completion(.failure(ProtocolError(.notFound, "row \(index) does not exist (the manifest has \(store.rows(offset: 0, limit: 0).total) rows)")))
                return
            }
            if let ref = row.object, store.objectIsPresent(ref) {
                counters.withLock { $0.hits += 1 }
                store.touch(ref.hash)
                completion(.success((row, ref)))
                return
            }
            guard fetch else {
                completion(.failure(ProtocolError(.notCached, "row \(index) is not cached")))
                return
            }
            counters.withLock { $0.misses += 1 }
            guard let url = resolvedURL(at: index) else {
                completion(.failure(ProtocolError(.upstream, row.url.isEmpty ? "row \(index) has no url in the manifest" : "row \(index): refusing to fetch \(row.url): only http and https URLs are fetched")))
                return
            }
            download(url: url) { result in
                switch result {
                case .success(let ref): completion(.success((row, ref)))
                case .failure(let f): completion(.failure(ProtocolError(.upstream, "row \(index) \(url): \(f.message)")))
                }
            }
        }
    }

    /// The running prefetches, by arguments, and who listens to each (CacheService+Prefetch.swift).
    let prefetches = Locked<[String: PrefetchListeners]>([:])
    let prefetchFinished = Locked<(@Sendable () -> Void)?>(nil)

    // MARK: Maintenance

    /// Re-hashes every object; corrupt ones are quarantined and fetched again.
    func verify(completion: @escaping @Sendable (Int, [Hash128], Int) -> Void) {
        pool.submit { [self] in
            let objects = store.knownObjects()
            var corrupt: [Hash128] = []
            var urls = Set<String>()
            for hash in objects {
                do throws(StoreError) {
                    let (fd, _) = try store.openVerified(hash)
                    fd.close()
                } catch {
                    switch error {
                    case .corruptObject(_, _, let rows), .missingObject(_, let rows):
                        corrupt.append(hash)
                        urls.formUnion(rows.compactMap { resolvedURL(at: $0) })
                    default:
                        break
                    }
                    log.warning("verify: \(error)")
                }
            }
            counters.withLock { $0.quarantined += corrupt.count }
            let corruptList = corrupt
            if urls.isEmpty { completion(objects.count, corrupt, 0); return }
            let repaired = Locked((count: 0, left: urls.count))
            for url in urls {
                download(url: url) { result in
                    let finished = repaired.withLock { r -> Int? in
                        if case .success = result { r.count += 1 }
                        r.left -= 1
                        return r.left == 0 ? r.count : nil
                    }
                    if let n = finished { completion(objects.count, corruptList, n) }
                }
            }
        }
    }
}
