import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

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
    public func prefetch(_ scope: PrefetchTarget, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                         then completion: @escaping Completion<PrefetchReport>) {
        let key = "\(scope.rawValue)\(force ? "+force" : "")"
        guard prefetchFlight.join(key, listener: progress, completion) else {
            counters.withLock { $0.coalesced += 1 }
            log.info("prefetch \(key) joined the one already running")
            return
        }
        let started = Clock.monotonicNanoseconds()
        let startedWall = Double(Clock.wallMilliseconds()) / 1000
        runPrefetch(scope, force: force, progress: { [self] p in
            prefetchFlight.update(key, p)
            emit(.progress(p))
        }, completion: { [self] done in
            let result = withWarnings(done, configuredScope(scope))
            logFinished(key, result, took: Clock.elapsed(since: started))
            let finished = LastPrefetch(started: startedWall, finished: Double(Clock.wallMilliseconds()) / 1000,
                                        report: try? result.get(), error: result.failureReason)  // the error is kept beside
            lastPrefetch.withLock { $0 = finished }
            onPrefetchFinished?()
            if case .success = result { emit(.prefetchFinished(succeeded: true)) } else { emit(.prefetchFinished(succeeded: false)) }
            prefetchFlight.finish(key, result)
        })
    }

    /// The report with the standing "has more" warnings of the feeds in `scope`.
    private func withWarnings(_ result: Result<PrefetchReport, CacheError>, _ scope: PrefetchTarget) -> Result<PrefetchReport, CacheError> {
        let warnings = refresher.feedWarnings(posts: scope.posts, images: scope.images)
        switch result {
        case .success(var r): r.warnings = warnings; return .success(r)
        case .failure(.partialPrefetch(var r, let e)): r.warnings = warnings; return .failure(.partialPrefetch(r, failure: e))
        case .failure: return result
        }
    }

    private func logFinished(_ key: String, _ result: Result<PrefetchReport, CacheError>, took: Duration) {
        let seconds = took.inSeconds
        switch result {
        case .success(let r):
            var parts: [String] = []
            if let p = r.posts {
                parts.append("posts \(p.fetched) fetched, \(p.unchanged) unchanged, \(p.removed) removed, \(p.invalid) invalid, \(p.kept) kept")
            }
            if let i = r.images {
                parts.append("images \(i.downloaded) downloaded, \(i.cached) cached, \(i.revalidated) revalidated (\(i.changed) changed), "
                             + "\(i.failed) failed, \(i.skipped) skipped, \(i.transfers) transfers, \(i.bytes) bytes")
            }
            if !r.warnings.isEmpty { parts.append("incomplete: " + r.warnings.joined(separator: "; ")) }
            log.notice("prefetch \(key) finished in \(NumberText.fixed(seconds, 2)) s: \(parts.joined(separator: "; "))")
        case .failure(.partialPrefetch(let r, let e)):
            logFinished(key, .success(r), took: took)
            log.warning("prefetch \(key) failed in part after \(NumberText.fixed(seconds, 2)) s: \(e)")
        case .failure(let e):
            log.warning("prefetch \(key) failed after \(NumberText.fixed(seconds, 2)) s: \(e)")
        }
    }

    /// `all` is what is configured: a daemon with only `posts-url` (a
    /// timeline mirrored with no images) or only `images-url` prefetches
    /// that feed, and succeeds, rather than failing on the other's absence.
    /// Neither configured, or a feed named that is not, still fails.
    func configuredScope(_ scope: PrefetchTarget) -> PrefetchTarget {
        guard scope == .all else { return scope }
        let config = refresher.settings()
        switch (config.postsURL != nil, config.imagesURL != nil) {
        case (true, false): return .posts
        case (false, true): return .images
        default: return .all
        }
    }

    private func runPrefetch(_ asked: PrefetchTarget, force: Bool, progress: @escaping @Sendable (Progress) -> Void,
                             completion: @escaping Completion<PrefetchReport>) {
        let scope = configuredScope(asked)
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
        refresher.refreshPosts(force: force) { result in
            progress(Progress(phase: "posts", done: 1, total: 1, bytes: 0))
            switch result {
            case .success(let s): images(s, nil)
            case .failure(let e): images(nil, e)
            }
        }
    }
}

extension Result where Failure == CacheError {
    /// The failure's description; nil for a success.
    var failureReason: String? {
        if case .failure(let e) = self { return e.description }
        return nil
    }
}
