import CacheStore
import CacheSystem

/// `verify`, `gc` and `compact`: always on a worker.
extension CacheService {
    /// Re-hashes every object (whatever `verify-reads` says); corrupt and
    /// unreadable ones are quarantined and fetched again.
    public func verify(then completion: @escaping @Sendable (VerifyReport) -> Void) {
        pool.submit { [self] in
            let objects = store.knownObjects()
            var corrupt: [Hash128] = []
            var urls = Set<String>()
            let view = manifestView()
            var quarantined = 0
            for hash in objects {
                do throws(StoreError) {
                    let (fd, _) = try store.openVerified(hash, rehash: true)
                    fd.close()
                } catch {
                    switch error {
                    case .corruptObject(_, _, let rows), .missingObject(_, let rows):
                        corrupt.append(hash)
                        quarantined += 1
                        urls.formUnion(rows.compactMap { view.resolved($0) })
                    case .unreadableObject(_, _, _, let outcome, let rows):
                        corrupt.append(hash)
                        if outcome != .handledAlready { quarantined += 1 }
                        urls.formUnion(rows.compactMap { view.resolved($0) })
                    default:
                        break
                    }
                    log.warning("verify: \(error)")
                }
            }
            counters.withLock { $0.quarantined += quarantined }
            let report = VerifyReport(checked: objects.count, corrupt: corrupt.map(\.hex), repaired: 0)
            repair(urls, report, completion)
        }
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
