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
        variants.make(source, spec, settings) { [self] result in
            completion(result.map { with(entry, $0) }.mapError { $0.about("row \(entry.row) variant \(spec)") })
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
