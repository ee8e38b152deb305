import CacheStore
import CacheSystem

/// `verify`, `gc` and `compact`: always on a worker.
extension CacheService {
    /// Re-hashes every object (whatever `verify-reads` says). Corrupt and
    /// unreadable ones are set aside by the store, which logs, counts and
    /// starts their repair (`objectSetAside`); missing ones are counted
    /// here and downloaded again. The report waits for all of it. An object
    /// larger than a chunk without chunk digests (stored before format
    /// version 4) gets them from the same pass, logged `chunkDigestBatch`
    /// objects to a transaction.
    public func verify(then completion: @escaping @Sendable (VerifyReport) -> Void) {
        pool.submit { [self] in
            let objects = store.knownObjects()
            var setAside: [Hash128] = []
            var missing: [Hash128] = []
            var urls = Set<String>()
            var digested: [(hash: Hash128, chunks: ChunkDigests)] = []
            let view = manifestView()
            var checked = 0
            objects: for hash in objects {
                // Shutdown: the rest is left for a verify after the restart.
                if store.isStopping { break }
                do throws(StoreError) {
                    if let chunks = try verifyObject(hash) { digested.append((hash, chunks)) }
                    if digested.count == Self.chunkDigestBatch { recordChunkDigests(&digested) }
                } catch {
                    switch error {
                    case .stopped:
                        break objects
                    case .corruptObject, .unreadableObject:
                        setAside.append(hash)
                    case .missingObject(_, let rows):
                        missing.append(hash)
                        urls.formUnion(rows.compactMap { view.resolved($0) })
                        log.warning("verify: \(error)")
                    default:
                        log.warning("verify: \(error)")
                    }
                }
                checked += 1
            }
            recordChunkDigests(&digested)
            if checked < objects.count {
                log.notice("verify: stopped at \(NumberText.grouped(checked)) of \(NumberText.grouped(objects.count)) objects; run it again after the restart")
            }
            counters.withLock { $0.quarantined += missing.count }
            let report = VerifyReport(checked: checked, corrupt: (setAside + missing).map(\.hex), repaired: 0)
            repair(setAside, missing: urls, report, completion)
        }
    }

    /// Objects whose new chunk digests `verify` logs in one transaction.
    static let chunkDigestBatch = 256

    /// One object of `verify`, hashed whole (whatever `verify-reads` says,
    /// its use time left alone): the chunk digests it lacked, computed in
    /// that pass, or nil.
    private func verifyObject(_ hash: Hash128) throws(StoreError) -> ChunkDigests? {
        guard store.lacksChunkDigests(hash) else {
            let (fd, _) = try store.openVerified(hash, rehash: true, touching: false, stoppable: true)
            fd.close()
            return nil
        }
        let (fd, _, chunks) = try store.openVerifiedComputingChunks(hash, touching: false)
        fd.close()
        return chunks
    }

    /// Logs the chunk digests `verify` found and empties the list; a failure
    /// is logged (they are computed again by the next whole hash).
    private func recordChunkDigests(_ digested: inout [(hash: Hash128, chunks: ChunkDigests)]) {
        do throws(StoreError) { try store.recordChunkDigests(digested) } catch {
            log.warning("verify: could not log the chunk digests of \(digested.count) objects: \(error)")
        }
        digested.removeAll()
    }

    /// Waits for the repairs of `setAside` and downloads `urls` (of missing
    /// objects) again; the report counts the objects that came back with
    /// the bytes their name says (once each, however many URLs name one).
    private func repair(_ setAside: [Hash128], missing urls: Set<String>, _ report: VerifyReport,
                        _ completion: @escaping @Sendable (VerifyReport) -> Void) {
        let waits = setAside.count + urls.count
        if waits == 0 { completion(report); return }
        let corrupt = Set(report.corrupt)
        let progress = Locked((repaired: Set<String>(), left: waits))
        let done: @Sendable (String?) -> Void = { hex in
            let finished = progress.withLock { p -> Int? in
                if let hex, corrupt.contains(hex) { p.repaired.insert(hex) }
                p.left -= 1
                return p.left == 0 ? p.repaired.count : nil
            }
            if let n = finished {
                var out = report
                out.repaired = n
                completion(out)
            }
        }
        for hash in setAside { awaitRepair(hash) { back in done(back ? hash.hex : nil) } }
        for url in urls {
            download(url: url) { result in
                if case .success(let ref) = result { done(ref.hash.hex) } else { done(nil) }
            }
        }
    }

    /// `gc`: removes files the index does not name.
    public func collectGarbage(then completion: @escaping Completion<GarbageReport>) {
        pool.submit { [self] in
            do throws(StoreError) {
                let (removed, freed) = try store.collectGarbage()
                log.info("gc removed \(removed) files, \(freed) bytes")
                completion(.success(GarbageReport(removed: removed, freedBytes: freed)))
            } catch {
                noteStopped(error)
                completion(.failure(.store(error, doing: "gc failed")))
            }
        }
    }

    /// `compact`: rewrites the log with only live records, then collects garbage.
    public func compact(then completion: @escaping Completion<CompactionReport>) {
        pool.submit { [self] in
            do throws(StoreError) {
                let (before, after) = try store.compact()
                let (removed, freed) = try store.collectGarbage()
                log.info("compacted the log from \(before) to \(after) records; gc removed \(removed) files, \(freed) bytes")
                completion(.success(CompactionReport(recordsBefore: before, recordsAfter: after)))
            } catch {
                noteStopped(error)
                completion(.failure(.store(error, doing: "compact failed")))
            }
        }
    }

    /// Logs a pass that shutdown cut short (`StoreError.stopped`): what and how far.
    private func noteStopped(_ error: StoreError) {
        if case .stopped(let what) = error { log.notice(what) }
    }
}
