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

    static var badHash: CacheError { .invalid("\"hash\" must be 32 lowercase hex digits") }

    /// On a worker: the object's file, verified; a corrupt one is quarantined
    /// and, once, downloaded again.
    private func verifiedFile(_ hash: Hash128, retry: Bool, _ completion: @escaping Completion<VerifiedFile>) {
        guard store.objectRef(hash) != nil else {
            completion(.failure(.notFound("object \(hash.hex) is not in the store")))
            return
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerified(hash)
            completion(.success(VerifiedFile(descriptor: fd, size: size)))
        } catch {
            log.warning("read: \(error)")
            switch error {
            case .missingObject: completion(.failure(.notFound("\(error)")))
            case .corruptObject(_, _, let rows):
                counters.withLock { $0.quarantined += 1 }
                refetch(hash, rows: rows, error: error, retry: retry, failed: { completion(.failure($0)) }) { [self] in
                    verifiedFile(hash, retry: false, completion)
                }
            default: completion(.failure(.store(error, doing: "")))
            }
        }
    }

    /// Downloads a quarantined object again from a row that still names it,
    /// then reads it `again`; `failed` when it cannot (no `retry`, no row,
    /// other bytes).
    func refetch(_ hash: Hash128, rows: [Int], error: StoreError, retry: Bool,
                 failed: @escaping @Sendable (CacheError) -> Void, again: @escaping @Sendable () -> Void) {
        let view = manifestView()
        guard retry, let url = rows.lazy.compactMap({ view.resolved($0) }).first else {
            failed(.notFound("\(error); no row refers to it any more"))
            return
        }
        download(url: url) { result in
            if case .success(let ref) = result, ref.hash == hash {
                again()
            } else {
                failed(.notFound("\(error); downloading it again from \(url) did not give the same bytes"))
            }
        }
    }
}
