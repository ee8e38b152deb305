import CacheStore
import CacheSystem
import CacheVariant

/// Making one variant: once however many ask (`variantFlight`), one job at
/// a time per original (`variantTrials`), failures remembered per original
/// or per variant (`variantRefusals`), jobs of an original that failed
/// before kept off the last helper (`VariantJob.suspect`); docs/operations.md,
/// "Image variants".
extension CacheService {
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
        tryVariant(source, spec, settings, waited: false, finish)
    }

    /// Answers a remembered failure at once; else, unless a job of another
    /// variant of the same original is at the helpers (then this one waits
    /// for its outcome, and comes back here with `waited`), gives the
    /// helpers a job.
    private func tryVariant(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings, waited: Bool,
                            _ finish: @escaping @Sendable (Result<VariantRef, CacheError>) -> Void) {
        let key = VariantKey(source: source.hash, spec: spec)
        if let refused = variantRefusals.withLock({ $0.refusal(key, now: Clock.monotonicNanoseconds()) }) {
            finish(.failure(refused))
            return
        }
        guard let helpers = variantHelpers else {
            finish(.failure(.unavailable("variants need the \(VariantHelpers.programName) program, which was not found "
                                         + "(docs/operations.md, \"Image variants\")")))
            return
        }
        if !waited {
            let resume: @Sendable () -> Void = { [self] in pool.submit { [self] in tryVariant(source, spec, settings, waited: true, finish) } }
            guard variantTrials.withLock({ $0.begin(source.hash, resume: resume) }) else { return }
        }
        // The job that tries the original lets those that waited for it go on.
        let ended: @Sendable () -> Void = { [self] in if !waited { endTrial(source.hash) } }
        guard var job = variantJob(source, spec, settings, finish) else { ended(); return }
        job.suspect = variantRefusals.withLock { $0.failedBefore(source.hash) }
        counters.withLock { $0.variantJobs += 1 }
        let maxSize = job.maxResult
        helpers.submit(job) { [self] made in
            switch made {
            case .failure(let f):
                let error = failed(key, f, settings)
                ended()
                finish(.failure(error))
            case .success(let m):
                variantRefusals.withLock { $0.made(source.hash) }
                ended()
                pool.submit { [self] in commit(m, of: source, spec, maxSize: maxSize, finish) }
            }
        }
    }

    /// The job trying `source` ended: the variants that waited for it go on.
    private func endTrial(_ source: Hash128) {
        for resume in variantTrials.withLock({ $0.end(source) }) { resume() }
    }

    /// The answer to a job that failed, remembered (and logged) when it
    /// would fail again: for the original or for the variant.
    private func failed(_ key: VariantKey, _ f: VariantFailure, _ settings: VariantSettings) -> CacheError {
        if case .source(let e) = f { objectReadFailed(path: store.objectPath(key.source), file: nil, e) }
        guard f.remembered else { return Self.cacheError(f) }
        let error = variantRefusals.withLock {
            $0.note(key, f, retryAfter: settings.retryAfter, now: Clock.monotonicNanoseconds(), wallSeconds: Clock.wallSeconds())
        }
        log.warning("variant \(key.spec) of \(key.source): \(error)")
        return error
    }

    /// Stores a variant a helper made, durably.
    private func commit(_ m: MadeVariant, of source: ObjectRef, _ spec: VariantSpec, maxSize: Int64,
                       _ finish: @Sendable (Result<VariantRef, CacheError>) -> Void) {
        do throws(StoreError) {
            let v = try store.commitVariant(m.bytes, of: source.hash, spec, width: m.width, height: m.height, maxSize: maxSize)
            counters.withLock { $0.variantsMade += 1 }
            finish(.success(v))
        } catch {
            finish(.failure(.store(error, doing: "storing the variant")))
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
}
