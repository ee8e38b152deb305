import CacheStore
import CacheSystem

/// A part of an object's file, opened read-only and verified through this
/// very descriptor: the chunks holding the `length` bytes from `offset`
/// hashed to the digests logged for them (or the whole object to its name).
/// Bytes outside them were not checked and must not be sent. The receiver
/// closes it.
public struct VerifiedRange: Sendable {
    /// The object's file, read-only; its position is 0.
    public var descriptor: FileDescriptor
    /// The whole object's size.
    public var size: Int64
    /// Where the verified bytes to send begin.
    public var offset: Int64
    /// How many there are (at least 1).
    public var length: Int64
}

/// A range of an object, verified by the chunks it covers: the HTTP
/// front-end's `Range` requests (docs/http.md, "Images and objects").
extension CacheService {
    /// An object larger than this is worth a range's own path
    /// (`objectRange`): its chunks are this size, and an object of one
    /// chunk or less is hashed whole either way (`Store.chunkSize`, 1 MiB).
    public static var rangeChunkSize: Int64 { Store.chunkSize }

    /// The object named `hash` (32 lowercase hex digits), opened to send the
    /// `length` bytes from `offset`: only the chunks those bytes lie in are
    /// read and hashed before it is handed over, on a worker (always
    /// `.later`: a chunk is more than the loop may hash). An object stored
    /// before chunk digests existed is hashed whole this once, and gets them.
    /// A mismatch or read error is handled as for `read`: the file set
    /// aside, counted, downloaded again where a row still names it, then
    /// verified again and served.
    public func objectRange(hash: Hash128, offset: Int64, length: Int64,
                            then completion: @escaping Completion<VerifiedRange>) -> Outcome<VerifiedRange> {
        pool.submit { [self] in verifiedRange(hash, offset: offset, length: length, retry: true, completion) }
        return .later
    }

    /// On a worker: the range's chunks verified; a corrupt, unreadable or
    /// missing object waits for its repair and is read again once.
    private func verifiedRange(_ hash: Hash128, offset: Int64, length: Int64, retry: Bool,
                               _ completion: @escaping Completion<VerifiedRange>) {
        let failed: @Sendable (CacheError) -> Void = { completion(.failure($0)) }
        let again: @Sendable () -> Void = { [self] in verifiedRange(hash, offset: offset, length: length, retry: false, completion) }
        guard store.objectRef(hash) != nil else {
            afterRepair(hash, retry: retry, else: "object \(hash.hex) is not in the store", failed: failed, again: again)
            return
        }
        do throws(StoreError) {
            let (fd, size) = try store.openVerifiedRange(hash, offset: offset, length: length)
            completion(.success(VerifiedRange(descriptor: fd, size: size, offset: offset, length: length)))
        } catch {
            afterFailure(hash, error, retry: retry, doing: "read of a range", failed: failed, again: again)
        }
    }
}
