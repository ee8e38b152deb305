import CacheStore
import CacheSystem
import CacheVariant

/// Makes variants (docs/operations.md, "Image variants"), owning all the
/// state of it: once however many ask (`flight`), one job at a time per
/// original (`trials`), failures remembered per original or per variant
/// (`refusals`), jobs of an original that failed before kept off the last
/// helper (`VariantJob.suspect`), the settings a reload changes. Reaches
/// the store only through `VariantStore` and the helpers only through
/// `VariantJobRunner`, so it is tested alone (`VariantMakerTests`).
final class VariantMaker: Sendable {
    private let store: any VariantStore
    /// Nil when `cached-variant` was not found: every job is refused saying so.
    private let runner: (any VariantJobRunner)?
    private let onWorker: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let log: Logger
    /// The largest object the store takes and the free space kept (the feeds' settings, which a reload changes).
    private let bounds: @Sendable () -> (maxObjectSize: Int64, minFreeSpace: Int64)
    /// An original that could not be read: the service sets it aside.
    private let unreadable: @Sendable (String, SystemError) -> Void
    /// Counts into the service's counters.
    private let count: @Sendable (@Sendable (inout CounterValues) -> Void) -> Void

    /// What clients may ask of variants (a reload changes it: `apply`).
    private let settings: Locked<VariantSettings>
    private let flight = SingleFlight<VariantKey, Result<VariantRef, CacheError>>()
    private let refusals = Locked(VariantRefusals())
    private let trials = Locked(VariantTrials())

    init(store: any VariantStore, runner: (any VariantJobRunner)?, settings: VariantSettings, log: Logger,
         onWorker: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
         bounds: @escaping @Sendable () -> (maxObjectSize: Int64, minFreeSpace: Int64),
         unreadable: @escaping @Sendable (String, SystemError) -> Void,
         count: @escaping @Sendable (@Sendable (inout CounterValues) -> Void) -> Void) {
        self.store = store
        self.runner = runner
        self.settings = Locked(settings)
        self.log = log
        self.onWorker = onWorker
        self.bounds = bounds
        self.unreadable = unreadable
        self.count = count
    }

    /// The variant settings in effect.
    var current: VariantSettings { settings.withLock { $0 } }

    /// Applies a reloaded `variant-timeout` and `variant-memory` (a helper
    /// running keeps its memory limit until it is replaced).
    func apply(jobTimeout: Duration, memory: Int64) { runner?.apply(jobTimeout: jobTimeout, memory: memory) }

    /// Refuses new jobs and ends the helpers (the daemon stops).
    func stop() { runner?.stop() }

    /// Applies reloaded settings; what was refused under the old ones may be made under these.
    func apply(_ new: VariantSettings) {
        settings.withLock { $0 = new }
        refusals.withLock { $0.removeAll() }
    }

    /// Makes the variant `spec` of `source` once, however many ask at the
    /// same time: read verified, made by a helper, stored durably. One
    /// that could not be made is answered from memory for a while
    /// (`VariantRefusals`).
    func make(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings,
              then: @escaping @Sendable (Result<VariantRef, CacheError>) -> Void) {
        let key = VariantKey(source: source.hash, spec: spec)
        guard flight.join(key, then) else { count { $0.coalesced += 1 }; return }
        let finish: @Sendable (Result<VariantRef, CacheError>) -> Void = { [self] result in
            if case .failure = result { count { $0.variantFailures += 1 } }
            flight.finish(key, result)
        }
        // Made by a flight that ended between this caller's look and its join.
        if let v = store.variant(of: source.hash, spec), settings.admits(v), store.objectFileLooksRight(v.object) {
            finish(.success(v))
            return
        }
        attempt(source, spec, settings, waited: false, finish)
    }

    /// Answers a remembered failure at once; else, unless a job of another
    /// variant of the same original is at the helpers (then this one waits
    /// for its outcome, and comes back here with `waited`), gives the
    /// helpers a job.
    private func attempt(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings, waited: Bool,
                         _ finish: @escaping @Sendable (Result<VariantRef, CacheError>) -> Void) {
        let key = VariantKey(source: source.hash, spec: spec)
        if let refused = refusals.withLock({ $0.refusal(key, now: Clock.monotonicNanoseconds()) }) {
            finish(.failure(refused))
            return
        }
        guard let runner else {
            finish(.failure(.unavailable("variants need the \(VariantHelpers.programName) program, which was not found "
                                         + "(docs/operations.md, \"Image variants\")")))
            return
        }
        if !waited {
            let resume: @Sendable () -> Void = { [self] in onWorker { [self] in attempt(source, spec, settings, waited: true, finish) } }
            guard trials.withLock({ $0.begin(source.hash, resume: resume) }) else { return }
        }
        // The job that tries the original lets those that waited for it go on.
        let ended: @Sendable () -> Void = { [self] in if !waited { endTrial(source.hash) } }
        guard var job = job(source, spec, settings, finish) else { ended(); return }
        job.suspect = refusals.withLock { $0.failedBefore(source.hash) }
        count { $0.variantJobs += 1 }
        let maxSize = job.maxResult
        runner.submit(job) { [self] made in
            switch made {
            case .failure(let f):
                let error = failed(key, f, settings)
                ended()
                finish(.failure(error))
            case .success(let m):
                refusals.withLock { $0.made(source.hash) }
                ended()
                onWorker { [self] in commit(m, of: source, spec, maxSize: maxSize, finish) }
            }
        }
    }

    /// The job trying `source` ended: the variants that waited for it go on.
    private func endTrial(_ source: Hash128) {
        for resume in trials.withLock({ $0.end(source) }) { resume() }
    }

    /// The answer to a job that failed, remembered (and logged) when it
    /// would fail again: for the original or for the variant.
    private func failed(_ key: VariantKey, _ f: VariantFailure, _ settings: VariantSettings) -> CacheError {
        if case .source(let e) = f { unreadable(store.objectPath(key.source), e) }
        guard f.remembered else { return Self.cacheError(f) }
        let error = refusals.withLock {
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
            count { $0.variantsMade += 1 }
            finish(.success(v))
        } catch {
            finish(.failure(.store(error, doing: "storing the variant")))
        }
    }

    /// The job for a variant of `source`: its original opened verified,
    /// the result bounded by what the box can hold. Nil (and `finish`
    /// called) when it cannot be made now.
    private func job(_ source: ObjectRef, _ spec: VariantSpec, _ settings: VariantSettings,
                     _ finish: @Sendable (Result<VariantRef, CacheError>) -> Void) -> VariantJob? {
        let (maxSize, headroom) = bounds()
        do throws(StoreError) { try store.checkHeadroom(headroom, needed: 0) } catch {
            finish(.failure(.store(error, doing: "no variant made")))
            return nil
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerifiedOriginal(source.hash)
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
