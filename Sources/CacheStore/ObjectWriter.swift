#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Receives one download into a temp file under `tmp/`, hashing as it writes
/// (the whole, and each chunk for `ChunkDigests`, in the same pass), so an
/// image never has to sit whole in memory nor be read back.
///
/// Owned by one thread at a time: the fetch thread while bytes arrive, then
/// the commit thread that commits it (a worker, for a failed transfer). `Store.commitObject` or `discard()` ends it.
// Safe unchecked: the fetch thread appends while the transfer runs, then
// it is handed to the one thread that commits or discards it; no two
// threads ever use it at once. The hand-over goes through the lock of the
// sink that holds it (`ObjectSink`), which orders the accesses.
public final class ObjectWriter: @unchecked Sendable {
    /// The temp file's path.
    public let tempPath: String
    /// The most bytes accepted; more fails with `StoreError.tooLarge`.
    public let maxSize: Int64
    private let fd: FileDescriptor
    private var hasher = ObjectHasher()
    private(set) public var size: Int64 = 0
    /// The body's first bytes, up to `ImageType.sniffLength` (4 KiB), from
    /// which its type is decided.
    private var head: [UInt8] = []
    private var closed = false

    /// The store's directory, through which the temp file is created.
    private let files: ConfinedDirectory
    /// Removes the temp file through the store (`Store.removeTemp`), which
    /// does nothing once the store is closed.
    private let remove: @Sendable (String) throws(SystemError) -> Void
    /// The store's `onWarning`: told when the temp file cannot be removed.
    private let onWarning: (@Sendable (String) -> Void)?

    init(tempPath: String, maxSize: Int64, files: ConfinedDirectory, remove: @escaping @Sendable (String) throws(SystemError) -> Void,
         onWarning: (@Sendable (String) -> Void)?) throws(SystemError) {
        self.tempPath = tempPath
        self.maxSize = maxSize
        self.files = files
        self.remove = remove
        self.onWarning = onWarning
        fd = try files.open(tempPath, [.writeOnly, .create, .exclusive], mode: 0o644)
    }

    deinit { discard() }

    /// Appends the next bytes of the body.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(StoreError) {
        guard size + Int64(bytes.count) <= maxSize else { throw .tooLarge(limit: maxSize) }
        if head.count < ImageType.sniffLength {
            head.append(contentsOf: bytes.prefix(ImageType.sniffLength - head.count))
        }
        do throws(SystemError) { try fd.writeAll(bytes) } catch { throw .io(error) }
        hasher.update(bytes)
        size += Int64(bytes.count)
    }

    /// Forgets what was written, for a retried transfer.
    public func reset() throws(StoreError) {
        do throws(SystemError) {
            try fd.truncate(to: 0)
            try fd.seek(to: 0)
        } catch { throw .io(error) }
        hasher.reset()
        size = 0
        head = []
    }

    /// The image type the first bytes are, or nil: decided by the bytes
    /// alone, never by what the origin declared.
    public var imageType: ImageType? { ImageType.detect(head) }
    /// What the refusal of these bytes says after `not an image: `, for
    /// `StoreError.notAnImage`: the declared Content-Type (nil when the
    /// caller does not know it) and what the bytes look like.
    func refusalDetail(declared: String?) -> String {
        ImageType.refusalDetail(declared: declared, head: head)
    }
    public var hash: Hash128 { hasher.hash }
    /// The digest of each chunk of the bytes so far; nil while they fit in
    /// one chunk (`ChunkDigests.defaultShift`).
    public var chunkDigests: ChunkDigests? { hasher.digestsSoFar }

    func syncAndClose() throws(SystemError) {
        try fd.sync()
        close()
    }

    /// Called once the temp file was renamed into place or deduplicated.
    func markDone() { done = true }
    private var done = false

    private func close() {
        if !closed { fd.close(); closed = true }
    }

    /// Closes and removes the temp file (one that cannot be removed is
    /// reported, and removed with the rest of `tmp/` at the next start).
    public func discard() {
        close()
        if !done {
            do throws(SystemError) { try remove(tempPath) } catch {
                onWarning?("could not remove the temp file \(tempPath) (\(error)); it is removed at the next start")
            }
        }
        done = true
    }
}
