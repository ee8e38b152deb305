import CacheProtocol
import CacheStore
import CacheSystem

/// How much of an object a front-end sends, decided once it knows the
/// object (`imageBody`'s `plan`): nothing (a 304, a 416, a HEAD), all of
/// it, or a range.
public enum BodyRead: Sendable, Equatable {
    /// Nothing is read (a 304, a 416, a HEAD).
    case none
    /// All of the object.
    case whole
    /// `length` bytes from `offset` (within the object).
    case range(offset: Int64, length: Int64)
}

/// An object's bytes as a front-end's plan asked for them, verified.
public enum BodyContent: Sendable {
    /// Nothing was read (`BodyRead.none`).
    case none
    /// The whole object (also for a range of an object of one chunk: the
    /// front-end sends the part of it it asked for).
    case whole(ObjectBody)
    /// Only the chunks a range lies in were verified (an object of more than one chunk).
    case part(VerifiedRange)
}

/// The object a request named, the front-end's plan for it, and its content.
public struct ImageBody<Plan: Sendable>: Sendable {
    /// The object found (the image, its variant, or the object named).
    public var object: ObjectInfo
    /// What the front-end's plan decided for it.
    public var plan: Plan
    /// What was read of it, as the plan asked.
    public var content: BodyContent
}

/// One call for a front-end that sends an image's or an object's bytes
/// (HTTP `/images/{row}`, `/objects/{hash}`): the object found, then read
/// verified as much as `plan` says, with the one retry a file gone since the
/// index was read deserves. So the front-end maps outcomes and nothing else
/// (docs/architecture.md, "The read path").
extension CacheService {
    /// Row `row`'s image (or its `variant`), then its bytes as `plan` asks
    /// for them. A row the index has as cached (or a stored variant) is read
    /// at once; when its file turns out to be gone, or the row is not
    /// cached, it takes the path of `image(row:)` (a download unless not
    /// `fetch`) or `imageVariant` (the variant made), and is read then.
    /// Counted once: a hit when the first read succeeds, else as that path
    /// counts it; a read that fails for another reason (an I/O error, no
    /// descriptor left) counts in neither, only in the front-end's errors.
    /// A variant not stored is made and read again once more should its
    /// file go meanwhile, as a variant found in the index is; an original
    /// not cached is downloaded and read, and downloaded once more should
    /// its file go before it is read (a store at its `max-size` evicting it
    /// at the end of a burst of downloads).
    public func imageBody<Plan: Sendable>(row: Int, variant: VariantRequest?, fetch: Bool,
                                          plan: @escaping @Sendable (ObjectInfo) -> (Plan, BodyRead),
                                          then completion: @escaping Completion<ImageBody<Plan>>) -> Outcome<ImageBody<Plan>> {
        guard let (info, hit) = indexed(row: row, variant) else {
            return resolvedBody(row: row, variant, fetch: fetch, retry: true, plan, completion)
        }
        return Self.chain({ [self] in body(info, plan, then: $0) }, completion) { [self] result, done in
            switch result {
            case .failure(.notFound): return resolvedBody(row: row, variant, fetch: fetch, retry: false, plan, done)
            case .success: hit()
            case .failure: break
            }
            return .now(result)
        }
    }

    /// The object `hash` (once back, when it is being repaired), then its bytes as `plan` asks.
    public func objectBody<Plan: Sendable>(hash: Hash128, plan: @escaping @Sendable (ObjectInfo) -> (Plan, BodyRead),
                                           then completion: @escaping Completion<ImageBody<Plan>>) -> Outcome<ImageBody<Plan>> {
        Self.chain({ [self] in objectInfo(hash: hash, then: $0) }, completion) { [self] result, done in
            switch result {
            case .failure(let e): return .now(.failure(e))
            case .success(let info): return body(info, plan, then: done)
            }
        }
    }

    /// The object the index names for the row (or its stored variant),
    /// without a look at its file, and how to count it once it is read.
    private func indexed(row index: Int, _ variant: VariantRequest?) -> (ObjectInfo, @Sendable () -> Void)? {
        guard store.manifestKnown, let row = store.row(index), let source = row.object else { return nil }
        guard let variant else {
            return (objectInfo(source), { [self] in counters.withLock { $0.hits += 1 }; store.touch(source.hash) })
        }
        let settings = variants.current
        guard case .success(let spec) = settings.resolve(variant, originalCode: source.type.rawValue),
              let v = store.variant(of: source.hash, spec), settings.admits(v) else { return nil }
        // The original is in use too: eviction must not take it before its thumbnails.
        return (objectInfo(v.object), { [self] in counters.withLock { $0.variantHits += 1 }; store.touch(source.hash) })
    }

    /// The row's entry the long way (`image(row:)`, `imageVariant`), then its
    /// object read; a file gone meanwhile takes the long way once more when `retry`.
    private func resolvedBody<Plan: Sendable>(row: Int, _ variant: VariantRequest?, fetch: Bool, retry: Bool,
                                              _ plan: @escaping @Sendable (ObjectInfo) -> (Plan, BodyRead),
                                              _ completion: @escaping Completion<ImageBody<Plan>>) -> Outcome<ImageBody<Plan>> {
        let entry: (@escaping Completion<ImageEntry>) -> Outcome<ImageEntry> = { [self] done in
            if let variant { return imageVariant(row: row, variant, then: done) }
            return image(row: row, fetch: fetch, then: done)
        }
        return Self.chain(entry, completion) { [self] result, done in
            let found: ObjectInfo
            switch result {
            case .failure(let e): return .now(.failure(e))
            case .success(let e):
                guard let info = variant == nil ? e.object : e.variant?.object else { return .now(.failure(.notCached(row: row))) }
                found = info
            }
            return Self.chain({ [self] in body(found, plan, then: $0) }, done) { [self] read, again in
                if case .failure(.notFound) = read, retry { return resolvedBody(row: row, variant, fetch: fetch, retry: false, plan, again) }
                return .now(read)
            }
        }
    }

    /// `info`'s bytes as `plan` asks for them, verified.
    private func body<Plan: Sendable>(_ info: ObjectInfo, _ plan: @Sendable (ObjectInfo) -> (Plan, BodyRead),
                                      then completion: @escaping Completion<ImageBody<Plan>>) -> Outcome<ImageBody<Plan>> {
        let (p, read) = plan(info)
        switch read {
        case .none:
            return .now(.success(ImageBody(object: info, plan: p, content: .none)))
        case let .range(offset, length) where info.size > Self.rangeChunkSize:
            return Self.chain({ [self] in objectRange(hash: info.hash, offset: offset, length: length, then: $0) }, completion) { r, _ in
                .now(r.map { ImageBody(object: info, plan: p, content: .part($0)) })
            }
        case .whole, .range:
            return Self.chain({ [self] in object(hash: info.hash, prefix: { _ in [] }, then: $0) }, completion) { r, _ in
                .now(r.map { ImageBody(object: info, plan: p, content: .whole($0)) })
            }
        }
    }

    /// `operation`, then `next` with its result, wherever that comes:
    /// returned when both answer now, else given to `completion`.
    static func chain<A: Sendable, B: Sendable>(
        _ operation: (@escaping Completion<A>) -> Outcome<A>, _ completion: @escaping Completion<B>,
        _ next: @escaping @Sendable (Result<A, CacheError>, @escaping Completion<B>) -> Outcome<B>
    ) -> Outcome<B> {
        let first = operation { a in
            if case .now(let b) = next(a, completion) { completion(b) }
        }
        switch first {
        case .later: return .later
        case .now(let a): return next(a, completion)
        }
    }
}
