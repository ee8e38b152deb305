import CacheFetch
import CacheStore
import CacheSystem

/// The listeners of one running prefetch.
struct PrefetchListeners {
    var progress: [@Sendable (Progress) -> Void] = []
    var completions: [Completion<PrefetchReport>] = []
}

/// `prefetch`: the feeds, then every row not cached, with progress, joined by identical requests.
extension CacheService {
    /// Called after every prefetch (the daemon refreshes its STATUS= line).
    public var onPrefetchFinished: (@Sendable () -> Void)? {
        get {
            guard let handler = prefetchFinished.withLock({ $0 }) else { return nil }
            return { handler(()) }
        }
        set { prefetchFinished.withLock { $0 = newValue.map { body in Handler { _ in body() } } } }
    }

    /// Refreshes the feeds in `scope` and downloads every image not cached
    /// (every image with `force`). Feed failures fail the answer (with
    /// `all`, when one feed failed and the other was done, as
    /// `CacheError.partialPrefetch` carrying what was done); image failures
    /// are listed. A prefetch with the same arguments as one already
    /// running joins it: it gets the remaining progress events and the same
    /// answer. The work does not depend on any client staying connected.
    public func prefetch(_ scope: PrefetchScope, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                         then completion: @escaping Completion<PrefetchReport>) {
        let key = "\(scope.rawValue)\(force ? "+force" : "")"
        let first = prefetches.withLock { p -> Bool in
            let isNew = p[key] == nil
            p[key, default: PrefetchListeners()].progress.append(progress)
            p[key, default: PrefetchListeners()].completions.append(completion)
            return isNew
        }
        guard first else {
            counters.withLock { $0.coalesced += 1 }
            log.info("prefetch \(key) joined the one already running")
            return
        }
        let started = Clock.monotonicNanoseconds()
        runPrefetch(scope, force: force, progress: { [self] p in
            for l in prefetches.withLock({ $0[key]?.progress ?? [] }) { l(p) }
            emit(.progress(p))
        }, completion: { [self] result in
            let waiters = prefetches.withLock { $0.removeValue(forKey: key)?.completions ?? [] }
            logFinished(key, result, seconds: Double(Clock.monotonicNanoseconds() - started) / 1e9)
            onPrefetchFinished?()
            if case .success = result { emit(.prefetchFinished(succeeded: true)) } else { emit(.prefetchFinished(succeeded: false)) }
            for w in waiters { w(result) }
        })
    }

    private func logFinished(_ key: String, _ result: Result<PrefetchReport, CacheError>, seconds: Double) {
        switch result {
        case .success(let r):
            var parts: [String] = []
            if let p = r.posts { parts.append("posts \(p.fetched) fetched, \(p.unchanged) unchanged, \(p.removed) removed, \(p.invalid) invalid") }
            if let i = r.images { parts.append("images \(i.downloaded) downloaded, \(i.cached) cached, \(i.failed) failed, \(i.bytes) bytes") }
            log.notice("prefetch \(key) finished in \(NumberText.fixed(seconds, 2)) s: \(parts.joined(separator: "; "))")
        case .failure(.partialPrefetch(let r, let e)):
            logFinished(key, .success(r), seconds: seconds)
            log.warning("prefetch \(key) failed in part after \(NumberText.fixed(seconds, 2)) s: \(e)")
        case .failure(let e):
            log.warning("prefetch \(key) failed after \(NumberText.fixed(seconds, 2)) s: \(e)")
        }
    }

    private func runPrefetch(_ scope: PrefetchScope, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                             completion: @escaping Completion<PrefetchReport>) {
        let images: @Sendable (PostsRefresh?, CacheError?) -> Void = { [self] refresh, postsError in
            let posts = refresh?.summary
            guard scope.images else {
                completion(postsError.map { .failure($0) } ?? .success(PrefetchReport(posts: posts)))
                return
            }
            prefetchImages(force: force, walked: refresh?.manifest, progress: progress) { result in
                // One feed failing does not take the other's summary with it.
                switch (result, postsError) {
                case (.success(let summary), nil): completion(.success(PrefetchReport(posts: posts, images: summary)))
                case (.success(let summary), let e?): completion(.failure(.partialPrefetch(PrefetchReport(images: summary), failure: e)))
                case (.failure(let e), nil) where scope.posts: completion(.failure(.partialPrefetch(PrefetchReport(posts: posts), failure: e)))
                case (.failure(let e), nil): completion(.failure(e))
                case (.failure(let e), let p?): completion(.failure(.several([p, e])))
                }
            }
        }
        guard scope.posts else { images(nil, nil); return }
        progress(Progress(phase: "posts", done: 0, total: 1, bytes: 0))
        refreshPosts(force: force) { result in
            progress(Progress(phase: "posts", done: 1, total: 1, bytes: 0))
            switch result {
            case .success(let s): images(s, nil)
            case .failure(let e): images(nil, e)
            }
        }
    }

    /// One images prefetch's tally, shared by its downloads' completions.
    final class ImagesRun: Sendable {
        let state: Locked<(summary: ImagesSummary, done: Int)>
        let total: Int
        init(total: Int, summary: ImagesSummary, done: Int) {
            self.total = total
            state = Locked((summary, done), rank: .prefetchTally)
        }
    }

    /// The manifest's rows to download, grouped by URL in first-row order.
    private struct DownloadPlan {
        var summary = ImagesSummary()
        var rowsByURL: [String: [Int]] = [:]
        var order: [String] = []
        var pending: Int { rowsByURL.values.reduce(0) { $0 + $1.count } }
    }

    private func plan(_ rows: [Row], force: Bool) -> DownloadPlan {
        let view = manifestView()
        var plan = DownloadPlan()
        for (i, row) in rows.enumerated() {
            if !force, let ref = row.object, store.objectIsPresent(ref) { plan.summary.cached += 1; continue }
            guard let url = view.resolved(i) else {
                plan.summary.failed += 1
                plan.summary.failures.append(RowFailure(row: i, url: row.url, error: row.url.isEmpty ? "no url in the manifest" : "not an http or https URL"))
                continue
            }
            if plan.rowsByURL[url] == nil { plan.order.append(url) }
            plan.rowsByURL[url, default: []].append(i)
        }
        return plan
    }

    private func prefetchImages(force: Bool, walked: [PageResult<DecodedManifestPage>]?, progress: @escaping @Sendable (Progress) -> Void,
                                completion: @escaping Completion<ImagesSummary>) {
        refreshManifest(force: force, walked: walked) { [self] result in
            if case .failure(let e) = result { completion(.failure(e)); return }
            let rows = store.rows(offset: 0, limit: Int.max).page
            let plan = plan(rows, force: force)
            let already = rows.count - plan.pending
            progress(Progress(phase: "images", done: already, total: rows.count, bytes: 0))
            if plan.pending == 0 { completion(.success(plan.summary)); return }
            let run = ImagesRun(total: rows.count, summary: plan.summary, done: already)
            let waiting = Locked(plan.order[...])
            // At most `prefetchWindow` downloads at once: each holds a temp
            // file until a worker commits it, and a 10,000-row manifest
            // handed to curl whole held thousands (EMFILE under a low limit).
            @Sendable func next() {
                guard let url = waiting.withLock({ $0.popFirst() }) else { return }
                downloadRow(url, rows: plan.rowsByURL[url] ?? [], run: run, progress: progress, completion: completion) { [pool] in
                    pool.submit { next() }  // not on the completing stack: failures can complete at once
                }
            }
            for _ in 0..<min(Self.prefetchWindow, plan.order.count) { next() }
        }
    }

    /// Downloads in flight at once in an images prefetch (curl runs
    /// `concurrency` of them; the rest wait their turn with no file open).
    static let prefetchWindow = 64

    private func downloadRow(_ url: String, rows rowsForURL: [Int], run: ImagesRun, progress: @escaping @Sendable (Progress) -> Void,
                             completion: @escaping Completion<ImagesSummary>, then ended: @escaping @Sendable () -> Void) {
        download(url: url) { [self] outcome in
            defer { ended() }
            // The event is posted under the run's lock, so events leave in
            // the order their counts were taken: never a smaller `done` after a larger.
            let finished = run.state.withLock { s -> ImagesSummary? in
                switch outcome {
                case .success(let ref):
                    s.summary.downloaded += rowsForURL.count
                    s.summary.bytes += ref.size
                    emit(.rowsCached(rows: rowsForURL, object: objectInfo(ref)))
                case .failure(let f):
                    s.summary.failed += rowsForURL.count
                    for r in rowsForURL { s.summary.failures.append(RowFailure(row: r, url: url, error: f.reason)) }
                }
                s.done += rowsForURL.count
                progress(Progress(phase: "images", done: s.done, total: run.total, bytes: s.summary.bytes))
                return s.done == run.total ? s.summary : nil
            }
            if var done = finished {
                done.failures.sort { $0.row < $1.row }
                completion(.success(done))
            }
        }
    }
}
