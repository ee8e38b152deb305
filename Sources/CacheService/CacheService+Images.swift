import CacheFetch
import CacheStore
import CacheSystem

/// `get_image` and `list_images`, and the single-flight download behind
/// every miss (docs/architecture.md, "The read path").
extension CacheService {
    /// `get_image`: the row and its cached object. A hit is answered now:
    /// the index in memory and one `fstatat` of the object file. A miss
    /// (and a manifest never fetched) goes to a worker, which downloads the
    /// image when `fetch` is true.
    public func image(row index: Int, fetch: Bool, then completion: @escaping Completion<ImageEntry>) -> Outcome<ImageEntry> {
        image(row: index, fetch: fetch, countingHit: true, then: completion)
    }

    /// `image(row:fetch:)`; a cached original counts in `hits` only when
    /// `countingHit` (a variant's request counts in the variant counters
    /// instead, docs/protocol.md "Counters"; a download is a miss either way).
    func image(row index: Int, fetch: Bool, countingHit: Bool, then completion: @escaping Completion<ImageEntry>) -> Outcome<ImageEntry> {
        if store.manifestKnown {
            guard let row = store.row(index) else { return .now(.failure(noSuchRow(index))) }
            if let ref = row.object, store.objectFileLooksRight(ref) {
                noteHit(ref, counting: countingHit)
                return .now(.success(entry(index, row, ref, resolvedURL(index, row))))
            }
            if row.object == nil && row.url.isEmpty { return .now(.failure(unfetchable(index, row.url))) }
            if row.object == nil && !fetch { return .now(.failure(.notCached(row: index))) }
        }
        pool.submit { [self] in imageOnWorker(row: index, fetch: fetch, countingHit: countingHit, completion) }
        return .later
    }

    /// The miss path: a worker may write the log (an object whose file went
    /// missing is forgotten) and start a download.
    private func imageOnWorker(row index: Int, fetch: Bool, countingHit: Bool, _ completion: @escaping Completion<ImageEntry>) {
        refresher.ensureManifest { [self] manifest in
            if case .failure(let e) = manifest { completion(.failure(e)); return }
            guard let row = store.row(index) else { completion(.failure(noSuchRow(index))); return }
            let view = manifestView()
            if let ref = row.object, store.objectIsPresent(ref) {
                noteHit(ref, counting: countingHit)
                completion(.success(entry(index, row, ref, view.resolved(index))))
                return
            }
            // A row without a URL has no image: not found, whether fetching or not, and no miss.
            if row.url.isEmpty { completion(.failure(unfetchable(index, row.url))); return }
            guard fetch else { completion(.failure(.notCached(row: index))); return }
            counters.withLock { $0.misses += 1 }
            guard let url = view.resolved(index) else { completion(.failure(unfetchable(index, row.url))); return }
            download(url: url) { [self] result in
                if case .success(let ref) = result { emit(.rowsCached(rows: [index], object: objectInfo(ref))) }
                completion(result.map { entry(index, row, $0, view.resolved(index)) }.mapError { $0.about("row \(index) \(url)") })
            }
        }
    }

    /// `list_images`: a page of the manifest; later when the manifest was
    /// never fetched, or the page holds more than `inlineListLimit` rows
    /// (built on a worker).
    public func images(offset: Int, limit: Int?, then completion: @escaping Completion<ImagesPage>) -> Outcome<ImagesPage> {
        if store.manifestKnown {
            let total = store.rows(offset: 0, limit: 0).total
            // Now when small and the manifest's view is current (rebuilding it walks every row).
            if Self.pageSize(total: total, offset: offset, limit: limit) <= Self.inlineListLimit, let view = currentManifestView() {
                return .now(.success(imagesPage(offset: offset, limit: limit, view)))
            }
            pool.submit { [self] in completion(.success(imagesPage(offset: offset, limit: limit))) }
            return .later
        }
        refresher.ensureManifest { [self] result in completion(result.map { _ in imagesPage(offset: offset, limit: limit) }) }
        return .later
    }

    private func imagesPage(offset: Int, limit: Int?, _ current: ManifestView? = nil) -> ImagesPage {
        let (total, page) = store.rows(offset: offset, limit: limit ?? Int.max)
        let view = current ?? manifestView()
        let start = min(max(offset, 0), total)
        return ImagesPage(total: total, images: page.enumerated().map { entry(start + $0, $1, $1.object, view.resolved(start + $0)) })
    }

    /// A cached original used: touched for eviction, counted when `counting`.
    private func noteHit(_ ref: ObjectRef, counting: Bool) {
        if counting { counters.withLock { $0.hits += 1 } }
        store.touch(ref.hash)
    }

    private func noSuchRow(_ index: Int) -> CacheError {
        .notFound("row \(index) does not exist (the manifest has \(store.rows(offset: 0, limit: 0).total) rows)")
    }

    /// A row whose URL may not be fetched: none (the row has no image: not
    /// found, as a post without one in a feed that is its own manifest), or
    /// not http or https (the manifest's fault: upstream).
    func unfetchable(_ index: Int, _ url: String) -> CacheError {
        url.isEmpty
            ? .notFound("row \(index) has no image: the manifest gives it no url (when no row has one, images-url-field may not name the member that does)")
            : .origin(OriginFailure(subject: "row \(index)", url: url, attempts: 0, reason: "refusing to fetch \(url.cut(toBytes: 1024)): only http and https URLs are fetched"))
    }

    /// Downloads the image at `url` once, however many callers ask at the same
    /// time, and maps every row with that URL (in the manifest as it is when
    /// the download ends) to the stored object.
    func download(url: String, completion: @escaping @Sendable (Result<ObjectRef, CacheError>) -> Void) {
        fetchImage(url: url, revalidating: nil) { completion($0.map(\.ref)) }
    }

    /// `ImageFetcher.fetch` with the rows of the manifest as it is when the transfer ends.
    func fetchImage(url: String, revalidating: Revalidation?, completion: @escaping @Sendable (Result<FetchedImage, CacheError>) -> Void) {
        imageFetcher.fetch(url: url, revalidating: revalidating, rows: { [self] in manifestView().rows(for: $0) }, completion: completion)
    }

    func objectInfo(_ ref: ObjectRef) -> ObjectInfo {
        ObjectInfo(hash: ref.hash, size: ref.size, mimeType: ref.type.mimeType, path: store.objectPath(ref.hash))
    }

    /// Row `index` as answered; `resolved` is its absolute URL (nil: the URL as written).
    func entry(_ index: Int, _ row: Row, _ ref: ObjectRef?, _ resolved: String?) -> ImageEntry {
        let url = resolved ?? row.url
        return ImageEntry(row: index, url: url, description: row.description, object: ref.map(objectInfo),
                          lastError: imageFetcher.lastError(url))
    }
}

extension CacheError {
    /// The same failure, said of `subject` (a row and its URL).
    func about(_ subject: String) -> CacheError {
        switch self {
        case .origin(var f): f.subject = subject; return .origin(f)
        case let .store(e, doing) where doing.isEmpty: return .store(e, doing: subject)
        default: return self
        }
    }
}
