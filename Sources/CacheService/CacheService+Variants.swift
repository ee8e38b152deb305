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
        let settings = variants.current
        // What can be refused before the original is known is refused now,
        // before any download; the rest once its type is (`resolved`).
        if case .failure(let e) = settings.resolve(request, originalCode: 0) { return .now(.failure(e)) }
        let original = image(row: index, fetch: true, countingHit: false) { [self] result in
            switch result {
            case .failure(let e): completion(.failure(e))
            case .success(let entry):
                switch resolved(entry, request, settings) {
                case .failure(let e): completion(.failure(e))
                // On a worker: after a download this runs on the commit thread
                // that stored the original, which keeps to commits.
                case .success(let found): pool.submit { [self] in variant(of: entry, found, settings, completion) }
                }
            }
        }
        switch original {
        case .later: return .later
        case .now(.failure(let e)): return .now(.failure(e))
        case .now(.success(let entry)):
            let found: (source: ObjectRef, spec: VariantSpec)
            switch resolved(entry, request, settings) {
            case .failure(let e): return .now(.failure(e))
            case .success(let f): found = f
            }
            if let stored = storedVariant(entry, found, settings) { return .now(.success(stored)) }
            pool.submit { [self] in variant(of: entry, found, settings, completion) }
            return .later
        }
    }

    /// The original a cached entry names and the variant `request` of it,
    /// resolved once for the original's type: refused, or what to look up and make.
    private func resolved(_ entry: ImageEntry, _ request: VariantRequest,
                          _ settings: VariantSettings) -> Result<(source: ObjectRef, spec: VariantSpec), CacheError> {
        guard let source = sourceObject(entry) else { return .failure(.notFound("row \(entry.row)'s image is no longer cached")) }
        return settings.resolve(request, originalCode: source.type.rawValue).map { (source, $0) }
    }

    /// The entry with its stored variant (a hit: counted, its use noted),
    /// or nil when the variant must be made.
    private func storedVariant(_ entry: ImageEntry, _ found: (source: ObjectRef, spec: VariantSpec), _ settings: VariantSettings) -> ImageEntry? {
        guard let v = store.variant(of: found.source.hash, found.spec), settings.admits(v), store.objectFileLooksRight(v.object) else { return nil }
        counters.withLock { $0.variantHits += 1 }
        store.touch(v.object.hash)
        store.touch(found.source.hash)
        return with(entry, v)
    }

    /// On a worker: the stored variant (one may have been stored
    /// meanwhile), or the one made now.
    private func variant(of entry: ImageEntry, _ found: (source: ObjectRef, spec: VariantSpec), _ settings: VariantSettings,
                         _ completion: @escaping Completion<ImageEntry>) {
        if let stored = storedVariant(entry, found, settings) { completion(.success(stored)); return }
        // Gone while the job waited for a worker (gc, eviction): said as a read before it would be.
        guard store.objectRef(found.source.hash) != nil else {
            completion(.failure(.notFound("row \(entry.row)'s image is no longer cached")))
            return
        }
        variants.make(found.source, found.spec, settings) { [self] result in
            completion(result.map { with(entry, $0) }.mapError { $0.about("row \(entry.row) variant \(found.spec)") })
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

    /// Applies reloaded variant settings; what was refused under the old
    /// ones may be made under these.
    public func apply(_ settings: VariantSettings) { variants.apply(settings) }

    /// Applies a reloaded `variant-timeout` and `variant-memory` (a helper
    /// running keeps its memory limit until it is replaced).
    public func apply(variantTimeout: Duration, memory: Int64) {
        variants.apply(jobTimeout: variantTimeout, memory: memory)
    }
}
