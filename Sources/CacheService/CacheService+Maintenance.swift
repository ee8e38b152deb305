import CacheStore
import CacheSystem

/// `verify`, `gc` and `compact`: always on a worker.
extension CacheService {
    /// Re-hashes every object; corrupt ones are quarantined and fetched
    /// again. An object larger than a chunk without chunk digests (stored
    /// before format version 4) gets them from the same pass, logged
    /// `chunkDigestBatch` objects to a transaction.
    public func verify(then completion: @escaping @Sendable (VerifyReport) -> Void) {
        pool.submit { [self] in
            let objects = store.knownObjects()
            var corrupt: [Hash128] = []
            var urls = Set<String>()
            var digested: [(hash: Hash128, chunks: ChunkDigests)] = []
            let view = manifestView()
            for hash in objects {
                do throws(StoreError) {
                    if let chunks = try verifyObject(hash) { digested.append((hash, chunks)) }
                    if digested.count == Self.chunkDigestBatch { recordChunkDigests(&digested) }
                } catch {
                    switch error {
                    case .corruptObject(_, _, let rows), .missingObject(_, let rows):
                        corrupt.append(hash)
                        urls.formUnion(rows.compactMap { view.resolved($0) })
                    default:
                        break
                    }
                    log.warning("verify: \(error)")
                }
            }
            recordChunkDigests(&digested)
            counters.withLock { $0.quarantined += corrupt.count }
            let report = VerifyReport(checked: objects.count, corrupt: corrupt.map(\.hex), repaired: 0)
            repair(urls, report, completion)
        }
    }

    /// Objects whose new chunk digests `verify` logs in one transaction.
    static let chunkDigestBatch = 256

    /// One object of `verify`, hashed whole: the chunk digests it lacked,
    /// computed in that pass, or nil.
    private func verifyObject(_ hash: Hash128) throws(StoreError) -> ChunkDigests? {
        guard store.lacksChunkDigests(hash) else {
            let (fd, _) = try store.openVerified(hash)
            fd.close()
            return nil
        }
        let (fd, _, chunks) = try store.openVerifiedComputingChunks(hash)
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

    /// Downloads `urls` again; the report counts the corrupt objects that
    /// came back with the bytes their name says (once each, however many
    /// URLs name one).
    private func repair(_ urls: Set<String>, _ report: VerifyReport, _ completion: @escaping @Sendable (VerifyReport) -> Void) {
        if urls.isEmpty { completion(report); return }
        let corrupt = Set(report.corrupt)
        let progress = Locked((repaired: Set<String>(), left: urls.count))
        for url in urls {
            download(url: url) { result in
                let finished = progress.withLock { p -> Int? in
                    if case .success(let ref) = result, corrupt.contains(ref.hash.hex) { p.repaired.insert(ref.hash.hex) }
                    p.left -= 1
                    return p.left == 0 ? p.repaired.count : nil
                }
                if let n = finished {
                    var done = report
                    done.repaired = n
                    completion(done)
                }
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
            } catch { completion(.failure(.store(error, doing: "gc failed"))) }
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
            } catch { completion(.failure(.store(error, doing: "compact failed"))) }
        }
    }
}
