import CacheStore
import CacheSystem

/// `read` and `open`: an object's verified bytes, or a verified descriptor.
extension CacheService {
    /// Objects up to 256 KiB whose bytes are in the page cache are verified
    /// and answered now: one non-blocking read that cannot stall an event
    /// loop. Larger ones would hold the loop for too long while hashing.
    static let inlineObjectLimit = 256 * 1024

    /// `read`: the object named by `hash` (32 lowercase hex digits), after
    /// `prefix(size)`, the front-end's framing. The bytes are verified
    /// against the hash before they are sent. A corrupt object is
    /// quarantined; when a row still names its URL it is downloaded again
    /// and, if the bytes match the hash asked for, served.
    public func object(hash: Hash128, prefix: @escaping @Sendable (Int64) -> [UInt8],
                       then completion: @escaping Completion<ObjectBody>) -> Outcome<ObjectBody> {
        // Under `on-change` a trusted object is sent from its file with
        // `sendfile` (the kernel hands the page cache's pages to the socket:
        // no copy here), unless it is small enough to be kept in memory.
        let sent = store.readVerification.mode == .onChange && (store.objectRef(hash)?.size ?? 0) > Store.keptObjectSize
        if sent, let (fd, size) = store.openTrustedIfCached(hash) {
            return .now(.success(.file(prefix: prefix(size), fd, size: size)))
        }
        if let bytes = store.readVerifiedIfCached(hash, upTo: Self.inlineObjectLimit, header: { prefix(Int64($0)) }) {
            return .now(.success(.inline(bytes)))
        }
        if !sent, let (fd, size) = store.openTrustedIfCached(hash) {
            return .now(.success(.file(prefix: prefix(size), fd, size: size)))
        }
        pool.submit { [self] in
            verifiedFile(hash, retry: true) { result in
                completion(result.map { .file(prefix: prefix($0.size), $0.descriptor, size: $0.size) })
            }
        }
        return .later
    }

    /// `open`: the object named by `hash` as a read-only descriptor (opened
    /// beneath the store without following links, close-on-exec), verified
    /// by hashing through that same descriptor, so that the file handed out
    /// is the one whose bytes were checked. Errors, quarantine and the
    /// download again of a corrupt object are those of `read`.
    public func openObject(hash: Hash128, then completion: @escaping Completion<VerifiedFile>) -> Outcome<VerifiedFile> {
        if let (fd, size) = store.openVerifiedIfCached(hash, upTo: Self.inlineObjectLimit) {
            return .now(.success(VerifiedFile(descriptor: fd, size: size)))
        }
        pool.submit { [self] in verifiedFile(hash, retry: true, completion) }
        return .later
    }

    /// `open` of many objects at once: each opened and verified as
    /// `openObject` does (those trusted or in the page cache now, the rest
    /// on workers, side by side), the outcomes in the order of `hashes`
    /// (one per hash, a hash named twice opened twice). Always a success:
    /// each object's failure is its own, and the batch is complete when the
    /// last object's is. The caller owns every descriptor.
    public func openObjects(hashes: [Hash128], then completion: @escaping Completion<[Result<VerifiedFile, CacheError>]>)
        -> Outcome<[Result<VerifiedFile, CacheError>]> {
        let batch = OpenBatch(count: hashes.count, completion)
        for (i, hash) in hashes.enumerated() {
            if case .now(let result) = openObject(hash: hash, then: { batch.set(i, $0) }) { batch.set(i, result) }
        }
        guard let all = batch.startedAll() else { return .later }
        return .now(.success(all))
    }

    /// What the index knows of the object named by `hash`: its size and
    /// type, without reading it (always now). Nothing is verified: a
    /// front-end answering a conditional or HEAD request sends no byte of it.
    public func objectInfo(hash: Hash128) -> Result<ObjectInfo, CacheError> {
        guard let ref = store.objectRef(hash) else { return .failure(.notFound("object \(hash) is not in the store")) }
        return .success(objectInfo(ref))
    }

    /// On a worker: the object's file, verified. One that is corrupt,
    /// unreadable or missing waits for its repair when one is under way
    /// (the store reported the file set aside: `objectSetAside`), then is
    /// served if the bytes came back.
    private func verifiedFile(_ hash: Hash128, retry: Bool, _ completion: @escaping Completion<VerifiedFile>) {
        let failed: @Sendable (CacheError) -> Void = { completion(.failure($0)) }
        let again: @Sendable () -> Void = { [self] in verifiedFile(hash, retry: false, completion) }
        guard store.objectRef(hash) != nil else {
            afterRepair(hash, retry: retry, else: "object \(hash.hex) is not in the store", failed: failed, again: again)
            return
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerified(hash)
            completion(.success(VerifiedFile(descriptor: fd, size: size)))
        } catch {
            afterFailure(hash, error, retry: retry, doing: "read", failed: failed, again: again)
        }
    }

    /// What a read (of the whole or a range) does when opening `hash`
    /// failed with `error`: a corrupt, unreadable or missing object waits for
    /// its repair (`afterRepair`); any other failure is answered.
    func afterFailure(_ hash: Hash128, _ error: StoreError, retry: Bool, doing: String,
                      failed: @escaping @Sendable (CacheError) -> Void, again: @escaping @Sendable () -> Void) {
        switch error {
        case .corruptObject, .unreadableObject:
            // Logged and counted once, where the file was set aside.
            afterRepair(hash, retry: retry, else: "\(error); no row refers to it any more", failed: failed, again: again)
        case .missingObject:
            log.warning("\(doing): \(error)")
            afterRepair(hash, retry: retry, else: "\(error)", failed: failed, again: again)
        default:
            log.warning("\(doing): \(error)")
            failed(.store(error, doing: ""))
        }
    }

    /// Joins the repair of `hash` if one is under way and then reads
    /// `again` (once); reads again at once if the object is back already;
    /// else fails with `notFound(why)`.
    func afterRepair(_ hash: Hash128, retry: Bool, else why: String,
                     failed: @escaping @Sendable (CacheError) -> Void, again: @escaping @Sendable () -> Void) {
        guard retry else { failed(.notFound(why)); return }
        let joined = repairFlight.joinIfRunning(hash) { failure in
            if let failure { failed(.notFound(failure)) } else { again() }
        }
        if joined { return }
        if store.objectRef(hash) != nil { again() } else { failed(.notFound(why)) }
    }

    /// The store's report of an object file set aside (called under its
    /// writer lock, before the index forgets the object: nothing here
    /// blocks or calls the store). Logged and counted once; its repair
    /// begins, so a request that finds the object gone finds it being
    /// downloaded again.
    func objectSetAside(_ s: SetAside) {
        log.warning("read: \(s.error)")
        counters.withLock { $0.quarantined += 1 }
        guard s.repair, repairFlight.begin(s.hash) else { return }
        pool.submit { [self] in
            if s.rows.isEmpty && !s.variants.isEmpty { remake(s.hash, variants: s.variants, error: s.error) } else {
                repair(s.hash, rows: s.rows, error: s.error)
            }
        }
    }

    /// A set-aside object that was variants and no row's image: each made
    /// again from its original (still stored), then the repair flight ends:
    /// nil for the waiters when one of them came back with the same bytes
    /// (libvips makes the same bytes of the same original), else why not.
    func remake(_ hash: Hash128, variants: [VariantKey], error: StoreError) {
        let settings = self.variants.current
        let sources = variants.compactMap { key in store.objectRef(key.source).map { (source: $0, spec: key.spec) } }
        guard !sources.isEmpty else {
            repairFlight.finish(hash, "\(error); the variant's original is no longer stored")
            return
        }
        let tally = Locked((left: sources.count, back: false))
        for (source, spec) in sources {
            self.variants.make(source, spec, settings) { [self] result in
                let done = tally.withLock { t -> Bool? in
                    if case .success(let v) = result, v.object.hash == hash { t.back = true }
                    t.left -= 1
                    return t.left == 0 ? t.back : nil
                }
                guard let done else { return }
                if done { log.notice("the variant \(hash) that was set aside was made again, with the same bytes") }
                repairFlight.finish(hash, done ? nil : "\(error); it was a variant, and making it again did not give the same bytes")
            }
        }
    }

    /// Downloads a set-aside object again from every URL of the rows that
    /// named it (the same bytes may sit under several URLs: each row is
    /// mapped again), then ends its repair flight: nil for the waiters when
    /// one of them gave bytes matching the hash, else why not.
    func repair(_ hash: Hash128, rows: [Int], error: StoreError) {
        let view = manifestView()
        var urls: [String] = []
        for url in rows.compactMap({ view.resolved($0) }) where !urls.contains(url) { urls.append(url) }
        guard !urls.isEmpty else {
            repairFlight.finish(hash, "\(error); no row refers to it any more")
            return
        }
        let failed = "\(error); downloading it again from \(urls.joined(separator: ", ")) did not give the same bytes"
        let tally = Locked((left: urls.count, back: false))
        for url in urls {
            repairDownload(hash, url) { [self] back in
                let done = tally.withLock { t -> Bool? in
                    t.back = t.back || back
                    t.left -= 1
                    return t.left == 0 ? t.back : nil
                }
                guard let done else { return }
                repairFlight.finish(hash, done ? nil : failed)
            }
        }
    }

    /// One URL of a repair: true when it gave the object's bytes. A download
    /// already running for the URL may have been a revalidation (its 304 is
    /// of no use for an object just set aside): when the first result is not
    /// the object, one more download of its own.
    private func repairDownload(_ hash: Hash128, _ url: String, then: @escaping @Sendable (Bool) -> Void) {
        download(url: url) { [self] first in
            if case .success(let ref) = first, ref.hash == hash { then(true); return }
            download(url: url) { second in
                if case .success(let ref) = second, ref.hash == hash { then(true) } else { then(false) }
            }
        }
    }

    /// Waits for the repair of `hash` when one is under way: true when the
    /// object came back. Calls `then` at once with false when none runs.
    func awaitRepair(_ hash: Hash128, then: @escaping @Sendable (Bool) -> Void) {
        Self.awaitRepair(hash, repairFlight, store, then: then)
    }

    /// `awaitRepair` for a part that has the repairs and the store but not the service (`ScrubRunner`).
    static func awaitRepair(_ hash: Hash128, _ repairs: SingleFlight<Hash128, String?>, _ store: Store,
                            then: @escaping @Sendable (Bool) -> Void) {
        if !repairs.joinIfRunning(hash, { then($0 == nil) }) { then(store.objectRef(hash) != nil) }
    }

    /// A read error met while an object file was being sent (the event
    /// loop's `sendfile`): the transfer was cut (never wrong bytes); here,
    /// on a worker, the file is set aside as `openVerified` sets one aside
    /// (logged once, counted, downloaded again), so the next request is served.
    public func objectReadFailed(path: String, file: FileIdentity?, _ error: SystemError) {
        Self.readFailed(store, pool, path: path, file: file, error)
    }

    /// `objectReadFailed` for a part that has the store and the pool but not the service (`VariantMaker`).
    static func readFailed(_ store: Store, _ pool: WorkerPool, path: String, file: FileIdentity?, _ error: SystemError) {
        pool.submit { _ = store.readFailed(path: path, file: file, error) }
    }

    /// `objectInfo`, or when the object is being repaired (set aside and
    /// downloaded again), its info once the repair ends.
    public func objectInfo(hash: Hash128, then completion: @escaping Completion<ObjectInfo>) -> Outcome<ObjectInfo> {
        let now = objectInfo(hash: hash)
        guard case .failure(.notFound) = now else { return .now(now) }
        let joined = repairFlight.joinIfRunning(hash) { [self] _ in completion(objectInfo(hash: hash)) }
        return joined ? .later : .now(now)
    }
}

/// The outcomes of one `openObjects`, gathered from the calling thread and
/// the workers: complete once every object has one and the caller has
/// started them all (it holds one count until then, so a worker that
/// finishes first cannot complete the batch under it).
private final class OpenBatch: Sendable {
    private let state: Locked<(results: [Result<VerifiedFile, CacheError>?], left: Int)>
    private let completion: Completion<[Result<VerifiedFile, CacheError>]>

    init(count: Int, _ completion: @escaping Completion<[Result<VerifiedFile, CacheError>]>) {
        state = Locked((Array(repeating: nil, count: count), count + 1))
        self.completion = completion
    }

    /// Object `index`'s outcome; the last one completes the batch.
    func set(_ index: Int, _ result: Result<VerifiedFile, CacheError>) {
        if let all = state.withLock({ s -> [Result<VerifiedFile, CacheError>]? in
            s.results[index] = result
            return Self.finished(&s)
        }) { completion(.success(all)) }
    }

    /// The caller has started every object: the outcomes when all are in
    /// (the batch is answered now and `completion` is never called), else nil.
    func startedAll() -> [Result<VerifiedFile, CacheError>]? {
        state.withLock { Self.finished(&$0) }
    }

    private static func finished(_ s: inout (results: [Result<VerifiedFile, CacheError>?], left: Int)) -> [Result<VerifiedFile, CacheError>]? {
        s.left -= 1
        return s.left == 0 ? s.results.map { $0! } : nil
    }
}
