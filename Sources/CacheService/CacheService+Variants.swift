import CacheStore
import CacheSystem
import CacheVariant

/// `get_image` with a variant: the original first (as `get_image`), then
/// its variant from the store, or made once by a helper however many ask
/// (docs/protocol.md, "Image variants"; docs/architecture.md).
extension CacheService {
    /// The row and the variant `request` of its image. A stored variant of a
    /// cached row is answered now; anything else later: the original
    /// downloaded if it must be, the variant made by a `cached-variant`
    /// helper and stored like any object.
    public func imageVariant(row index: Int, _ request: VariantRequest,
                             then completion: @escaping Completion<ImageEntry>) -> Outcome<ImageEntry> {
        let settings = variantSettings.withLock { $0 }
        // What can be refused before the original is known is refused now.
        if case .failure(let e) = settings.resolve(request, originalCode: 0) { return .now(.failure(e)) }
        let original = image(row: index, fetch: true, countingHit: false) { [self] result in
            switch result {
            case .failure(let e): completion(.failure(e))
            case .success(let entry): variant(of: entry, request, settings, completion)
            }
        }
        switch original {
        case .later: return .later
        case .now(.failure(let e)): return .now(.failure(e))
        case .now(.success(let entry)):
            if let stored = storedVariant(entry, request, settings) { return .now(stored) }
            pool.submit { [self] in variant(of: entry, request, settings, completion) }
            return .later
        }
    }

    /// The stored variant `request` of row `index`'s cached image, from the
    /// index alone (no `fstatat`, no row entry built): for a front-end that
    /// reads the variant's bytes next (`object(hash:)`), which verifies the
    /// file; should it be gone, the read fails with `notFound` and the
    /// front-end asks `imageVariant`, which makes it again. Nil when there is
    /// none stored (or the request is refused): ask `imageVariant`.
    public func cachedVariant(row index: Int, _ request: VariantRequest) -> ObjectInfo? {
        guard store.manifestKnown, let source = store.row(index)?.object else { return nil }
        let settings = variantSettings.withLock { $0 }
        guard case .success(let spec) = settings.resolve(request, originalCode: source.type.rawValue),
              let v = store.variant(of: source.hash, spec), settings.admits(v) else { return nil }
        counters.withLock { $0.variantHits += 1 }
        // The original is in use too: eviction must not take it before its thumbnails.
        store.touch(source.hash)
        return objectInfo(v.object)
    }

    /// The entry with its stored variant (a hit: counted, its use noted);
    /// a refusal of the request; or nil when the variant must be made.
    private func storedVariant(_ entry: ImageEntry, _ request: VariantRequest, _ settings: VariantSettings) -> Result<ImageEntry, CacheError>? {
        guard let source = sourceObject(entry) else { return nil }
        let spec: VariantSpec
        switch settings.resolve(request, originalCode: source.type.rawValue) {
        case .success(let s): spec = s
        case .failure(let e): return .failure(e)
        }
        guard let v = store.variant(of: source.hash, spec), settings.admits(v), store.objectFileLooksRight(v.object) else { return nil }
        counters.withLock { $0.variantHits += 1 }
        store.touch(v.object.hash)
        store.touch(source.hash)
        return .success(with(entry, v))
    }

    /// On a worker: the stored variant, or the one made now.
    private func variant(of entry: ImageEntry, _ request: VariantRequest, _ settings: VariantSettings,
                         _ completion: @escaping Completion<ImageEntry>) {
        if let stored = storedVariant(entry, request, settings) { completion(stored); return }
        guard let source = sourceObject(entry) else {
            completion(.failure(.notFound("row \(entry.row)'s image is no longer cached")))
            return
        }
        let spec: VariantSpec
        switch settings.resolve(request, originalCode: source.type.rawValue) {
        case .success(let s): spec = s
        case .failure(let e): completion(.failure(e)); return
        }
        makeVariant(source, spec, settings) { [self] result in
            completion(result.map { with(entry, $0) }.mapError { $0.about("row \(entry.row) variant \(spec)") })
        }
    }

    /// Makes the variant `spec` of `source` once, however many ask at the
    /// same time: read verified, made by a helper, stored durably. One
    /// that could not be made is answered from memory for a while
    /// (`VariantRefusals`).
    func makeVariant(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings,
                     then: @escaping @Sendable (Result<VariantRef, CacheError>) -> Void) {
        let key = VariantKey(source: source.hash, spec: spec)
        guard variantFlight.join(key, then) else { counters.withLock { $0.coalesced += 1 }; return }
        let finish: @Sendable (Result<VariantRef, CacheError>) -> Void = { [self] result in
            if case .failure = result { counters.withLock { $0.variantFailures += 1 } }
            variantFlight.finish(key, result)
        }
        // Made by a flight that ended between this caller's look and its join.
        if let v = store.variant(of: source.hash, spec), settings.admits(v), store.objectFileLooksRight(v.object) {
            finish(.success(v))
            return
        }
        if let refused = variantRefusals.withLock({ $0.refusal(key, now: Clock.monotonicNanoseconds()) }) {
            finish(.failure(refused))
            return
        }
        guard let helpers = variantHelpers else {
            finish(.failure(.unavailable("variants need the \(VariantHelpers.programName) program, which was not found "
                                         + "(docs/operations.md, \"Image variants\")")))
            return
        }
        guard let job = variantJob(source, spec, settings, finish) else { return }
        helpers.submit(job) { [self] made in
            switch made {
            case .failure(let f):
                if case .source(let e) = f { objectReadFailed(path: store.objectPath(source.hash), file: nil, e) }
                let error = Self.cacheError(f)
                if f.remembered {
                    log.warning("variant \(spec) of \(source.hash): \(error)")
                    variantRefusals.withLock { $0.note(key, error, refused: f.isRefusal, now: Clock.monotonicNanoseconds()) }
                }
                finish(.failure(error))
            case .success(let m):
                pool.submit { [self] in
                    do throws(StoreError) {
                        let v = try store.commitVariant(m.bytes, of: source.hash, spec, width: m.width, height: m.height,
                                                        maxSize: job.maxResult)
                        counters.withLock { $0.variantsMade += 1 }
                        finish(.success(v))
                    } catch {
                        finish(.failure(.store(error, doing: "storing the variant")))
                    }
                }
            }
        }
    }

    /// The job for a variant of `source`: its original opened verified,
    /// the result bounded by what the box can hold. Nil (and `finish`
    /// called) when it cannot be made now.
    private func variantJob(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings,
                            _ finish: @Sendable (Result<VariantRef, CacheError>) -> Void) -> VariantJob? {
        let (maxSize, headroom) = feeds.withLock { ($0.maxObjectSize, $0.minFreeSpace) }
        do throws(StoreError) { try store.checkHeadroom(headroom) } catch {
            finish(.failure(.store(error, doing: "no variant made")))
            return nil
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerified(source.hash)
            return VariantJob(spec: spec, source: fd, sourceSize: size, maxDimension: settings.maxDimension,
                              maxPixels: settings.maxPixels, maxResult: min(maxSize, settings.largestResult(spec)))
        } catch {
            finish(.failure(.store(error, doing: "reading the original")))
            return nil
        }
    }

    /// The object a cached entry names, as the index has it now.
    private func sourceObject(_ entry: ImageEntry) -> ObjectRef? {
        entry.object.flatMap { store.objectRef($0.hash) }
    }

    private func with(_ entry: ImageEntry, _ v: VariantRef) -> ImageEntry {
        var e = entry
        e.variant = VariantInfo(object: objectInfo(v.object), width: v.width, height: v.height)
        return e
    }

    /// A helper's failure as the service's: a refused image is the
    /// origin's bytes (`upstream`), a helper that failed is the daemon's.
    static func cacheError(_ f: VariantFailure) -> CacheError {
        switch f {
        case .refused: .origin(OriginFailure(subject: "", url: "", attempts: 0, reason: f.description))
        case .busy(let m): .busy(m)
        case .helperFailed, .notMade, .unavailable, .stopped: .unavailable(f.description)
        case .source(let e): .store(.io(e), doing: "reading the original")
        }
    }

    /// Applies reloaded variant settings; what was refused under the old
    /// ones may be made under these.
    public func apply(_ settings: VariantSettings) {
        variantSettings.withLock { $0 = settings }
        variantRefusals.withLock { $0.removeAll() }
    }

    /// Applies a reloaded `variant-timeout` and `variant-memory` (a helper
    /// running keeps its memory limit until it is replaced).
    public func apply(variantTimeout: Duration, memory: Int64) {
        variantHelpers?.apply(jobTimeout: variantTimeout, memory: memory)
    }
}
