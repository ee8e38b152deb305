import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// Prefetch: the feeds, then every row not cached, with progress, joined by identical requests.
extension CacheService {
    // MARK: Prefetch

    typealias PrefetchResult = Result<(PostsSummary?, ImagesSummary?), ProtocolError>

    /// The listeners of one running prefetch.
    struct PrefetchListeners {
        var progress: [@Sendable (Progress) -> Void] = []
        var completions: [@Sendable (PrefetchResult) -> Void] = []
    }

    /// Called after every prefetch (the daemon refreshes its STATUS= line).
    var onPrefetchFinished: (@Sendable () -> Void)? {
        get { prefetchFinished.withLock { $0 } }
        set { prefetchFinished.withLock { $0 = newValue } }
    }

    /// Refreshes the feeds named by `what` and downloads every image not cached
    /// (every image with `force`). Feed failures fail the whole answer; image
    /// failures are listed. A prefetch with the same arguments as one already
    /// running joins it: it gets the remaining progress events and the same
    /// answer. The work does not depend on any client staying connected.
    func prefetch(what: PrefetchTarget, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                  completion: @escaping @Sendable (PrefetchResult) -> Void) {
        let key = "\(what.rawValue)\(force ? "+force" : "")"
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
        runPrefetch(what: what, force: force, progress: { [self] p in
            for l in prefetches.withLock({ $0[key]?.progress ?? [] }) { l(p) }
        }, completion: { [self] result in
            let waiters = prefetches.withLock { $0.removeValue(forKey: key)?.completions ?? [] }
            let seconds = Double(Clock.monotonicNanoseconds() - started) / 1e9
            switch result {
            case .success(let (posts, images)):
                var parts: [String] = []
                if let p = posts { parts.append("posts \(p.fetched) fetched, \(p.unchanged) unchanged, \(p.removed) removed, \(p.invalid) invalid") }
                if let i = images { parts.append("images \(i.downloaded) downloaded, \(i.cached) cached, \(i.failed) failed, \(i.bytes) bytes") }
                log.notice("prefetch \(key) finished in \(NumberText.fixed(seconds, 2)) s: \(parts.joined(separator: "; "))")
            case .failure(let e):
                log.warning("prefetch \(key) failed after \(NumberText.fixed(seconds, 2)) s: \(e.message)")
            }
            onPrefetchFinished?()
            for w in waiters { w(result) }
        })
    }

    func runPrefetch(what: PrefetchTarget, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                             completion: @escaping @Sendable (PrefetchResult) -> Void) {
        let doPosts = what != .images
        let doImages = what != .posts
        let images: @Sendable (PostsSummary?, ProtocolError?) -> Void = { [self] posts, postsError in
            guard doImages else {
                if let postsError { completion(.failure(postsError)) } else { completion(.success((posts, nil))) }
                return
            }
            prefetchImages(force: force, progress: progress) { result in
                switch result {
                case .success(let summary):
                    if let postsError { completion(.failure(postsError)) } else { completion(.success((posts, summary))) }
                case .failure(let e):
                    completion(.failure(postsError.map { ProtocolError(.upstream, $0.message + "; " + e.message) } ?? e))
                }
            }
        }
        if doPosts {
            progress(Progress(phase: "posts", done: 0, total: 1, bytes: 0))
            refreshPosts(force: force) { result in
                progress(Progress(phase: "posts", done: 1, total: 1, bytes: 0))
                switch result {
                case .success(let s): images(s, nil)
                case .failure(let e): images(nil, e)
                }
            }
        } else {
            images(nil, nil)
        }
    }

    final class ImagesRun: Sendable {
        let state: Locked<(summary: ImagesSummary, done: Int)>
        let total: Int
        init(total: Int, summary: ImagesSummary) {
            self.total = total
            state = Locked((summary, 0))
        }
    }

    func prefetchImages(force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                                completion: @escaping @Sendable (Result<ImagesSummary, ProtocolError>) -> Void) {
        refreshManifest(force: force) { [self] result in
            if case .failure(let e) = result { completion(.failure(e)); return }
            let rows = store.rows(offset: 0, limit: Int.max).page
            let view = manifestView()
            var summary = ImagesSummary()
            var byURL: [String: [Int]] = [:]
            var order: [String] = []
            for (i, row) in rows.enumerated() {
                if !force, let ref = row.object, store.objectIsPresent(ref) { summary.cached += 1; continue }
                guard let url = view.resolved.indices.contains(i) ? view.resolved[i] : nil else {
                    summary.failed += 1
                    summary.failures.append((i, row.url, row.url.isEmpty ? "no url in the manifest" : "not an http or https URL"))
                    continue
                }
                if byURL[url] == nil { order.append(url) }
                byURL[url, default: []].append(i)
            }
            let pending = byURL.values.reduce(0) { $0 + $1.count }
            let run = ImagesRun(total: rows.count, summary: summary)
            let already = rows.count - pending
            progress(Progress(phase: "images", done: already, total: rows.count, bytes: 0))
            if pending == 0 { completion(.success(summary)); return }
            run.state.withLock { $0.done = already }
            for url in order {
                let rowsForURL = byURL[url] ?? []
                download(url: url) { outcome in
                    // The event is posted under the run's lock, so events leave in
                    // the order their counts were taken: never a smaller `done` after a larger.
                    let finished = run.state.withLock { s -> ImagesSummary? in
                        switch outcome {
                        case .success(let ref):
                            s.summary.downloaded += rowsForURL.count
                            s.summary.bytes += ref.size
                        case .failure(let f):
                            s.summary.failed += rowsForURL.count
                            for r in rowsForURL { s.summary.failures.append((r, url, f.message)) }
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
    }
}
