import CacheStore
import CacheSystem

/// The manifest's URLs resolved once per manifest change: per row, and rows
/// by URL (several rows may name one URL). One view serves a whole
/// operation, so a miss resolves the manifest once, not per step.
struct ManifestView: Sendable {
    var generation: Int
    /// The settings the base was derived from: a view is current while
    /// they and the generation are (comparing them costs less than
    /// deriving the base again, which every image hit would otherwise do).
    var settings: BaseSettings
    var base: String?
    /// The URL of each row as written in the manifest.
    var written: [String]
    /// The absolute URL of each row, nil when it has none that may be fetched.
    var resolvedURLs: [String?]
    var rowsByURL: [String: [Int]]

    /// The absolute URL of row `index`, or nil when it has none that may be fetched.
    func resolved(_ index: Int) -> String? {
        resolvedURLs.indices.contains(index) ? resolvedURLs[index] : nil
    }

    /// The rows naming `url`, with the URL each had when the view was made
    /// (a commit skips rows whose URL changed since).
    func rows(for url: String) -> [(row: Int, url: String)] {
        (rowsByURL[url] ?? []).map { (row: $0, url: written[$0]) }
    }

    init(rows: [Row], generation: Int, settings: BaseSettings) {
        self.generation = generation
        self.settings = settings
        let base = FeedDecoder.baseURL(imagesURL: settings.imagesURL, imagesBaseURL: settings.imagesBaseURL)
        self.base = base
        var memo: [String: String?] = [:]
        written = []
        resolvedURLs = []
        rowsByURL = [:]
        written.reserveCapacity(rows.count)
        resolvedURLs.reserveCapacity(rows.count)
        for (i, row) in rows.enumerated() {
            let r: String?
            if let m = memo[row.url] { r = m } else { r = FeedDecoder.resolve(row.url, base: base); memo[row.url] = r }
            written.append(row.url)
            resolvedURLs.append(r)
            if let r { rowsByURL[r, default: []].append(i) }
        }
    }
}

/// The settings relative image URLs are resolved with.
struct BaseSettings: Sendable, Equatable {
    var imagesURL: String?
    var imagesBaseURL: String?
}

extension CacheService {
    /// The current view, rebuilt only when the manifest or the base
    /// changed: a walk of every row, so never on the event loop (checked in
    /// debug builds; the loop asks `currentManifestView` or `resolvedURL`).
    /// One thread rebuilds it at a time (`manifestRebuild`); the others,
    /// as many as the commit threads that finish after a manifest change,
    /// wait for it and take its view rather than each copy every row.
    func manifestView() -> ManifestView {
        if let v = currentManifestView() { return v }
        NonBlockingThread.assertMayBlock("rebuilding the manifest's view of every row")
        return manifestRebuild.withLock { _ in
            if let v = currentManifestView() { return v }
            let v = ManifestView(rows: store.rows(offset: 0, limit: Int.max).page, generation: store.manifestGeneration,
                                 settings: baseSettings)
            manifestViews.withLock { $0 = v }
            return v
        }
    }

    /// The view when it is current, else nil (memory only).
    func currentManifestView() -> ManifestView? {
        let generation = store.manifestGeneration, settings = baseSettings
        guard let v = manifestViews.withLock({ $0 }), v.generation == generation, v.settings == settings else { return nil }
        return v
    }

    /// Row `index`'s absolute URL: from the current view, or resolved alone
    /// (one URL, not every row: what the loop may do).
    func resolvedURL(_ index: Int, _ row: Row) -> String? {
        if let v = currentManifestView() { return v.resolved(index) }
        return FeedDecoder.resolve(row.url, base: FeedDecoder.baseURL(imagesURL: baseSettings.imagesURL, imagesBaseURL: baseSettings.imagesBaseURL))
    }

    private var baseSettings: BaseSettings {
        feeds.withLock { BaseSettings(imagesURL: $0.imagesURL, imagesBaseURL: $0.imagesBaseURL) }
    }
}
