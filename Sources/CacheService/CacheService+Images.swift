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
        if store.manifestKnown {
            guard let row = store.row(index) else { return .now(.failure(noSuchRow(index))) }
            if let ref = row.object, store.objectFileLooksRight(ref) {
                noteHit(ref)
                return .now(.success(entry(index, row, ref, manifestView())))
            }
            if row.object == nil && !fetch { return .now(.failure(.notCached(row: index))) }
        }
        pool.submit { [self] in imageOnWorker(row: index, fetch: fetch, completion) }
        return .later
    }

    /// `get_image` for a front-end that reads the object's bytes next (with
    /// `object(hash:)`): a row cached by the index is answered from memory,
    /// without the `fstatat` of `image(row:)`. The read that follows opens
    /// and verifies the file; should it be gone, the read fails with
    /// `notFound` and the front-end asks `image(row:)`, which forgets it and
    /// downloads it again. Nil when the row is not cached (or not known):
    /// ask `image(row:)`.
    public func cachedImage(row index: Int) -> ImageEntry? {
        guard store.manifestKnown, let row = store.row(index), let ref = row.object else { return nil }
        counters.withLock { $0.hits += 1 }
        return entry(index, row, ref, manifestView())
    }

    /// The miss path: a worker may write the log (an object whose file went
    /// missing is forgotten) and start a download.
    private func imageOnWorker(row index: Int, fetch: Bool, _ completion: @escaping Completion<ImageEntry>) {
        ensureManifest { [self] manifest in
            if case .failure(let e) = manifest { completion(.failure(e)); return }
            guard let row = store.row(index) else { completion(.failure(noSuchRow(index))); return }
            let view = manifestView()
            if let ref = row.object, store.objectIsPresent(ref) {
                noteHit(ref)
                completion(.success(entry(index, row, ref, view)))
                return
            }
            guard fetch else { completion(.failure(.notCached(row: index))); return }
            counters.withLock { $0.misses += 1 }
            guard let url = view.resolved(index) else { completion(.failure(unfetchable(index, row.url))); return }
            download(url: url) { [self] result in
                if case .success(let ref) = result { emit(.rowsCached(rows: [index], object: objectInfo(ref))) }
                completion(result.map { entry(index, row, $0, view) }.mapError { $0.about("row \(index) \(url)") })
            }
        }
    }

    /// `list_images`: a page of the manifest; later when the manifest was
    /// never fetched, or the page holds more than `inlineListLimit` rows
    /// (built on a worker).
    public func images(offset: Int, limit: Int?, then completion: @escaping Completion<ImagesPage>) -> Outcome<ImagesPage> {
        if store.manifestKnown {
            let total = store.rows(offset: 0, limit: 0).total
            guard Self.pageSize(total: total, offset: offset, limit: limit) > Self.inlineListLimit else {
                return .now(.success(imagesPage(offset: offset, limit: limit)))
            }
            pool.submit { [self] in completion(.success(imagesPage(offset: offset, limit: limit))) }
            return .later
        }
        ensureManifest { [self] result in completion(result.map { _ in imagesPage(offset: offset, limit: limit) }) }
        return .later
    }

    private func imagesPage(offset: Int, limit: Int?) -> ImagesPage {
        let (total, page) = store.rows(offset: offset, limit: limit ?? Int.max)
        let view = manifestView()
        let start = min(max(offset, 0), total)
        return ImagesPage(total: total, images: page.enumerated().map { entry(start + $0, $1, $1.object, view) })
    }

    private func noteHit(_ ref: ObjectRef) {
        counters.withLock { $0.hits += 1 }
        store.touch(ref.hash)
    }

    private func noSuchRow(_ index: Int) -> CacheError {
        .notFound("row \(index) does not exist (the manifest has \(store.rows(offset: 0, limit: 0).total) rows)")
    }

    /// A row whose URL may not be fetched: none, or not http or https.
    func unfetchable(_ index: Int, _ url: String) -> CacheError {
        url.isEmpty
            ? .origin(OriginFailure(subject: "", url: url, attempts: 0, reason: "row \(index) has no url in the manifest"))
            : .origin(OriginFailure(subject: "row \(index)", url: url, attempts: 0, reason: "refusing to fetch \(url): only http and https URLs are fetched"))
    }

    func objectInfo(_ ref: ObjectRef) -> ObjectInfo {
        ObjectInfo(hash: ref.hash.hex, size: ref.size, mimeType: ref.type.mimeType, path: store.objectPath(ref.hash))
    }

    func entry(_ index: Int, _ row: Row, _ ref: ObjectRef?, _ view: ManifestView) -> ImageEntry {
        ImageEntry(row: index, url: view.resolved(index) ?? row.url, description: row.description,
                   object: ref.map(objectInfo))
    }

    // MARK: Downloads

    /// Downloads the image at `url` once, however many callers ask at the same
    /// time, and maps every row with that URL (in the manifest as it is when
    /// the download ends) to the stored object.
    func download(url: String, completion: @escaping @Sendable (Result<ObjectRef, CacheError>) -> Void) {
        guard imageFlight.join(url, completion) else { counters.withLock { $0.coalesced += 1 }; return }
        let (maxSize, headroom) = feeds.withLock { ($0.maxObjectSize, $0.minFreeSpace) }
        // Under min-free-space nothing is asked of the origin: the room left is the posts' and the log's.
        do throws(StoreError) { try store.checkHeadroom(headroom) } catch {
            log.warning("image \(url) not downloaded: \(error)")
            imageFlight.finish(url, .failure(.store(error, doing: "")))
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
        http.fetch(HTTPRequest(url: url, maxBodySize: maxSize), into: sink) { [self] result in
            pool.submit { [self] in
                let outcome = commit(url, result, sink, view: manifestView(), headroom: headroom)
                if case .failure(let e) = outcome {
                    if case .origin = e { counters.withLock { $0.upstreamErrors += 1 } }
                    log.warning("image \(url) failed: \(e.reason)")
                }
                imageFlight.finish(url, outcome)
            }
        }
    }

    /// Stores a finished download (on a worker).
    private func commit(_ url: String, _ result: Result<HTTPResponse, FetchError>, _ sink: ObjectSink,
                        view: ManifestView, headroom: Int64) -> Result<ObjectRef, CacheError> {
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
        do throws(StoreError) {
            let writer = try sink.finishedWriter()
            do throws(StoreError) { try store.checkHeadroom(headroom) } catch {
                writer.discard()
                throw error
            }
            // Whether the bytes are an image depends on the bytes alone, so
            // every server gets the same answer; the declared type only
            // appears in a refusal's message.
            let ref = try store.commitObject(writer, rows: view.rows(for: url), declaredContentType: response.headers["content-type"])
            counters.withLock { $0.downloads += 1; $0.downloadBytes += ref.size }
            log.debug("downloaded \(url): \(ref.size) bytes, \(ref.hash)")
            return .success(ref)
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
