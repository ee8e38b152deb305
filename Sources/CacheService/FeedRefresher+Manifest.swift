import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// The manifest's refresh: every page walked (or the pages the posts'
/// refresh just walked, when both feeds share them), then every row stored
/// as one transaction (docs/protocol.md, "Feeds").
extension FeedRefresher {
    /// Refreshes the image manifest (joins a refresh already running that
    /// does as much: `ForcibleFlight`), or
    /// stores `walked` pages when the posts refresh just walked them.
    /// Succeeds with the number of rows.
    func refreshManifest(force: Bool, walked: SharedManifest? = nil,
                         completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        let again: @Sendable () -> Void = { [self] in refreshManifest(force: true, completion: completion) }
        guard manifestFlight.join(force: force, waiter: completion, again: again) == .run else { count { $0.coalesced += 1 }; return }
        let finish: @Sendable (Result<Int, CacheError>) -> Void = { [self] r in manifestFlight.finish(r) }
        // Within the flight no other manifest refresh stores: the walked
        // pages stand if the manifest is still the one they were walked over.
        let config = settings()
        let digest = settingsDigest(.manifest, config)
        if let walked, store.manifestPages == walked.base {
            onWorker { [self] in finish(storeManifest(walked.pages, warning: walked.warning, settings: walked.settings)) }
            return
        }
        let force = force || settingsChanged(.manifest, digest)
        let fetch = FeedFetch(setting: "images-url", url: config.imagesURL, feed: .manifest)
        let shape = config.imagesShape
        let walk = PageWalk<DecodedManifestPage>(fetch: fetch, shape: shape, stored: store.manifestPages, force: force, decode: { page, type, room throws(FeedError) in
            let m = try FeedDecoder.manifestPage(page.take(), shape: shape, fields: config.fields, contentType: type, room: room, url: page.url)
            return (m, m.facts)
        }, validatorsToStore: { [self] sent, response in validatorsToStore(.manifest, setting: fetch.setting, sent: sent, response: response) })
        fetchPages(walk) { [self] result in finish(result.flatMap { storeManifest($0.pages, warning: $0.warning, settings: digest) }) }
    }

    /// Stores the rows of every page as one transaction (rows are positions
    /// in the whole list); nothing is written when every page answered 304.
    private func storeManifest(_ pages: [PageResult<DecodedManifestPage>], warning: WalkWarning, settings digest: Hash128) -> Result<Int, CacheError> {
        let current = store.rows(offset: 0, limit: Int.max).page
        if pages.allSatisfy({ if case .unchanged = $0 { true } else { false } }) {
            noteWarning(.manifest, warning, settings: digest)
            return .success(current.count)
        }
        let slices = Self.storedSlices(store.manifestPages)
        var rows: [(url: String, description: String?)] = []
        var newPages: [FeedPage] = []
        for (n, result) in pages.enumerated() {
            var page = result.page
            switch result {
            case .unchanged(let p):
                let r = slices[p.url] ?? (n == 0 ? slices[""] : nil) ?? 0..<0
                rows += current[min(r.lowerBound, current.count)..<min(r.upperBound, current.count)].map { ($0.url, $0.description) }
                page.count = min(r.upperBound, current.count) - min(r.lowerBound, current.count)
            case .fresh(_, let decoded):
                rows += decoded.entries.map { ($0.url, $0.description) }
                page.count = decoded.entries.count
            }
            newPages.append(page)
        }
        Self.forgetLonePageURL(&newPages)
        do throws(StoreError) {
            let changed = try store.replaceManifest(rows, pages: newPages)
            noteWarning(.manifest, warning, settings: digest)
            log.info("manifest refreshed from \(pages.count) page\(pages.count == 1 ? "" : "s"): \(rows.count) rows, \(changed) changed")
            return .success(rows.count)
        } catch { return .failure(.store(error, doing: "could not store the manifest")) }
    }
}
