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
    public func object(hash hex: String, prefix: @escaping @Sendable (Int64) -> [UInt8],
                       then completion: @escaping Completion<ObjectBody>) -> Outcome<ObjectBody> {
        guard let hash = Hash128(hex: hex) else { return .now(.failure(Self.badHash)) }
        if let bytes = store.readVerifiedIfCached(hash, upTo: Self.inlineObjectLimit, header: { prefix(Int64($0)) }) {
            return .now(.success(.inline(bytes)))
        }
        if let (fd, size) = store.openTrustedIfCached(hash) {
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
    public func openObject(hash hex: String, then completion: @escaping Completion<VerifiedFile>) -> Outcome<VerifiedFile> {
        guard let hash = Hash128(hex: hex) else { return .now(.failure(Self.badHash)) }
        if let (fd, size) = store.openVerifiedIfCached(hash, upTo: Self.inlineObjectLimit) {
            return .now(.success(VerifiedFile(descriptor: fd, size: size)))
        }
        pool.submit { [self] in verifiedFile(hash, retry: true, completion) }
        return .later
    }

    /// What the index knows of the object named by `hash`: its size and
    /// type, without reading it (always now). Nothing is verified: a
    /// front-end answering a conditional or HEAD request sends no byte of it.
    public func objectInfo(hash hex: String) -> Result<ObjectInfo, CacheError> {
        guard let hash = Hash128(hex: hex) else { return .failure(Self.badHash) }
        guard let ref = store.objectRef(hash) else { return .failure(.notFound("object \(hex) is not in the store")) }
        return .success(objectInfo(ref))
    }

    private static var badHash: CacheError { .invalid("\"hash\" must be 32 lowercase hex digits") }

    /// On a worker: the object's file, verified; a corrupt or unreadable
    /// one is quarantined and, once, downloaded again (`repair`). An object
    /// being repaired is waited for.
    private func verifiedFile(_ hash: Hash128, retry: Bool, _ completion: @escaping Completion<VerifiedFile>) {
        guard store.objectRef(hash) != nil else {
            let joined = retry && repairFlight.joinIfRunning(hash) { [self] failure in
                if let failure { completion(.failure(.notFound(failure))) } else { verifiedFile(hash, retry: false, completion) }
            }
            if !joined { completion(.failure(.notFound("object \(hash.hex) is not in the store"))) }
            return
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerified(hash)
            completion(.success(VerifiedFile(descriptor: fd, size: size)))
        } catch {
            switch error {
            case .missingObject:
                log.warning("read: \(error)")
                completion(.failure(.notFound("\(error)")))
            case .corruptObject(_, _, let rows):
                noteQuarantined(error)
                repair(hash, rows: rows, error: error, retry: retry, completion)
            case .unreadableObject(_, _, _, let outcome, let rows):
                if outcome != .handledAlready { noteQuarantined(error) }
                repair(hash, rows: rows, error: error, retry: retry, completion)
            default:
                log.warning("read: \(error)")
                completion(.failure(.store(error, doing: "")))
            }
        }
    }

    /// Logs (once per object: only the request that set its file aside
    /// comes here) and counts an object quarantined.
    func noteQuarantined(_ error: StoreError) {
        log.warning("read: \(error)")
        counters.withLock { $0.quarantined += 1 }
    }

    /// Downloads a quarantined object again from a row that still names it,
    /// one download per object however many requests wait for it, then
    /// serves it if the bytes match the hash asked for.
    func repair(_ hash: Hash128, rows: [Int], error: StoreError, retry: Bool,
                        _ completion: @escaping Completion<VerifiedFile>) {
        guard retry else {
            completion(.failure(.notFound("\(error)")))
            return
        }
        let first = repairFlight.join(hash) { [self] failure in
            if let failure { completion(.failure(.notFound(failure))) } else { verifiedFile(hash, retry: false, completion) }
        }
        guard first else { return }
        let view = manifestView()
        guard let url = rows.lazy.compactMap({ view.resolved($0) }).first else {
            // Another request set it aside and may have brought it back already.
            repairFlight.finish(hash, store.objectRef(hash) != nil ? nil : "\(error); no row refers to it any more")
            return
        }
        download(url: url) { [self] result in
            if case .success(let ref) = result, ref.hash == hash {
                repairFlight.finish(hash, nil)
            } else {
                repairFlight.finish(hash, "\(error); downloading it again from \(url) did not give the same bytes")
            }
        }
    }

    /// A read error met while an object file was being sent (the event
    /// loop's `sendfile`): the transfer was cut (never wrong bytes); here,
    /// on a worker, the file is set aside, counted, logged once and
    /// downloaded again, so the next request is served.
    public func objectReadFailed(path: String, file: FileIdentity?, _ error: SystemError) {
        pool.submit { [self] in
            guard let failure = store.readFailed(path: path, file: file, error),
                  case .unreadableObject(let hash, _, _, let outcome, let rows) = failure else { return }
            if outcome != .handledAlready { noteQuarantined(failure) }
            repair(hash, rows: rows, error: failure, retry: true) { result in
                if case .success(let file) = result { file.descriptor.close() }
            }
        }
    }
}
