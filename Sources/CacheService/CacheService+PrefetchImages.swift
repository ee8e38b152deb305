import CacheFetch
import CacheStore
import CacheSystem

/// The images part of `prefetch`: which rows to download, which to
/// revalidate, which to skip (docs/operations.md, "Image freshness and
/// failures"), and the window of transfers that does it.
extension CacheService {
    /// One images prefetch's tally, shared by its transfers' completions.
    final class ImagesRun: Sendable {
        let state: Locked<(summary: ImagesSummary, done: Int)>
        let total: Int
        init(total: Int, summary: ImagesSummary, done: Int) {
            self.total = total
            state = Locked((summary, done), rank: .prefetchTally)
        }
    }

    /// One URL to fetch and the rows it is for.
    struct PlannedFetch: Sendable {
        var rows: [Int]
        /// Set when every row of the URL is cached but stale: a conditional request.
        var revalidating: Revalidation?
    }

    /// The manifest's rows to fetch, grouped by URL in first-row order.
    struct FetchPlan {
        var summary = ImagesSummary()
        var fetches: [String: PlannedFetch] = [:]
        var order: [String] = []
        var pending: Int { fetches.values.reduce(0) { $0 + $1.rows.count } }
    }

    /// What a prefetch does with each row: nothing for a cached row still
    /// fresh, a conditional request for a cached row gone stale, a download
    /// for a row not cached (or every row, with `force`), nothing for a row
    /// whose failures put it in backoff.
    func plan(_ rows: [Row], force: Bool) -> FetchPlan {
        let view = manifestView()
        let now = Clock.wallMilliseconds()
        let revalidateAfter = feeds.withLock { $0.imagesRevalidateAfter }
        // A row without a URL keeps the failure of "" only while no row has
        // one: once one does, such rows are skipped, and have no image, not a failure.
        let someURL = rows.contains { !$0.url.isEmpty }
        let failures = imageFetcher.failures(keeping: Set(rows.indices.map { view.resolved($0) ?? rows[$0].url }.filter { !$0.isEmpty || !someURL }))
        var plan = FetchPlan()
        var stale: [String: Revalidation] = [:]
        var needsDownload: Set<String> = []
        // A row with no URL has nothing to fetch (a feed's post without an
        // image, when the feed is its own manifest): skipped, not failed,
        // unless no row has one (then `images-url-field` is likely wrong).
        for (i, row) in rows.enumerated() {
            guard let url = view.resolved(i) else {
                if row.url.isEmpty && someURL {
                    plan.summary.skipped += 1
                    continue
                }
                let reason = row.url.isEmpty ? "no url in the manifest (no row has one: is images-url-field the member that names the image? "
                    + "An RSS or Atom item has an /image only from an image enclosure, media:content, media:thumbnail or itunes:image)"
                                             : "not an http or https URL"
                plan.summary.failed += 1
                plan.summary.failures.append(RowFailure(row: i, url: row.url, error: reason))
                imageFetcher.failed(row.url, RowError(time: Double(now) / 1000, reason: reason))
                continue
            }
            let cached = row.object.flatMap { store.objectIsPresent($0) ? $0 : nil }
            if !force, let ref = cached {
                // A row cached before format version 3 has no freshness and
                // no validators: stale, fetched once unconditionally (the same
                // bytes keep the object). Its last use is no stand-in for when
                // it came: a row read every hour would never go stale.
                let freshness = row.freshness ?? ImageFreshness(fetched: 0, lifetime: .noCache)
                guard freshness.isStale(now: now, revalidateAfter: revalidateAfter),
                      !failures.inBackoff(url, now: Double(now) / 1000) else {
                    plan.summary.cached += 1
                    continue
                }
                if stale[url] == nil { stale[url] = Revalidation(ref: ref, freshness: row.freshness) }
            } else {
                if !force && failures.inBackoff(url, now: Double(now) / 1000) { plan.summary.skipped += 1; continue }
                needsDownload.insert(url)
            }
            if plan.fetches[url] == nil { plan.order.append(url) }
            plan.fetches[url, default: PlannedFetch(rows: [])].rows.append(i)
        }
        // A URL with a row not cached is downloaded whole, for all its rows.
        for (url, r) in stale where !needsDownload.contains(url) { plan.fetches[url]?.revalidating = r }
        return plan
    }

    func prefetchImages(force: Bool, walked: SharedManifest?, progress: @escaping @Sendable (Progress) -> Void,
                        completion: @escaping Completion<ImagesSummary>) {
        refresher.refreshManifest(force: force, walked: walked) { [self] result in
            if case .failure(let e) = result { completion(.failure(e)); return }
            let rows = store.rows(offset: 0, limit: Int.max).page
            let plan = plan(rows, force: force)
            let already = rows.count - plan.pending
            progress(Progress(phase: "images", done: already, total: rows.count, bytes: 0))
            if plan.pending == 0 { completion(.success(plan.summary)); return }
            let run = ImagesRun(total: rows.count, summary: plan.summary, done: already)
            let waiting = Locked(plan.order[...])
            // At most `prefetchWindow` transfers at once: each holds a temp
            // file until a commit thread commits it, and a 10,000-row manifest
            // handed to curl whole held thousands (EMFILE under a low limit).
            @Sendable func next() {
                guard let url = waiting.withLock({ $0.popFirst() }), let planned = plan.fetches[url] else { return }
                fetchRows(url, planned, run: run, progress: progress, completion: completion) { [pool] in
                    pool.submit { next() }  // not on the completing stack: failures can complete at once
                }
            }
            for _ in 0..<min(Self.prefetchWindow, plan.order.count) { next() }
        }
    }

    /// Transfers in flight at once in an images prefetch (curl runs
    /// `concurrency` of them; the rest wait their turn with no file open).
    static let prefetchWindow = 64

    private func fetchRows(_ url: String, _ planned: PlannedFetch, run: ImagesRun, progress: @escaping @Sendable (Progress) -> Void,
                           completion: @escaping Completion<ImagesSummary>, then ended: @escaping @Sendable () -> Void) {
        let rowsForURL = planned.rows
        fetchImage(url: url, revalidating: planned.revalidating) { [self] outcome in
            defer { ended() }
            // The event is posted under the run's lock, so events leave in
            // the order their counts were taken: never a smaller `done` after a larger.
            let finished = run.state.withLock { s -> ImagesSummary? in
                s.summary.transfers += 1
                switch outcome {
                case .success(let fetched):
                    if !fetched.notModified { s.summary.bytes += fetched.ref.size }
                    if let old = planned.revalidating {
                        s.summary.revalidated += rowsForURL.count
                        if fetched.ref.hash == old.ref.hash { s.summary.unchanged += rowsForURL.count }
                        else { s.summary.changed += rowsForURL.count }
                    } else {
                        s.summary.downloaded += rowsForURL.count
                    }
                    if fetched.ref.hash != planned.revalidating?.ref.hash {
                        emit(.rowsCached(rows: rowsForURL, object: objectInfo(fetched.ref)))
                    }
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
