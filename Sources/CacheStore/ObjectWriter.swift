#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Receives one download into a temp file under `tmp/`, hashing as it writes,
/// so an image never has to sit whole in memory.
///
/// Owned by one thread at a time: the fetch thread while bytes arrive, then
/// the worker that commits it. `Store.commitObject` or `discard()` ends it.
// Safe unchecked: the fetch thread appends while the transfer runs, then
// it is handed to the one worker that commits or discards it; no two
// threads ever use it at once. The hand-over goes through the lock of the
// sink that holds it (`ObjectSink`), which orders the accesses.
public final class ObjectWriter: @unchecked Sendable {
    /// The temp file's path; for an unnamed one (`O_TMPFILE`), the
    /// directory it was opened in with `(unnamed)` after it, for messages.
    public let tempPath: String
    /// True for a file opened with `O_TMPFILE`: it has no name until
    /// `Store.commitObject` links it into `objects/`, and vanishes if closed first.
    let isUnnamed: Bool
    /// The most bytes accepted; more fails with `StoreError.tooLarge`.
    public let maxSize: Int64
    let fd: FileDescriptor
    private var hasher = StreamingHasher()
    private(set) public var size: Int64 = 0
    /// The body's first bytes, up to `ImageType.sniffLength` (4 KiB), from
    /// which its type is decided.
    private var head: [UInt8] = []
    private var closed = false

    /// The store's directory, through which the temp file is created and removed.
    private let files: ConfinedDirectory

    /// A writer for an empty temp file open for writing as `fd`, which it owns from now on.
    init(tempPath: String, fd: FileDescriptor, isUnnamed: Bool, maxSize: Int64, files: ConfinedDirectory) {
        self.tempPath = tempPath
        self.fd = fd
        self.isUnnamed = isUnnamed
        self.maxSize = maxSize
        self.files = files
    }

    deinit { discard() }

    /// Appends a chunk of the body.
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
    public var hash: Hash128 { hasher.digest() }

    /// Flushes the bytes to the device (before the file gets its object name).
    func sync() throws(SystemError) { try fd.sync() }

    /// Called once the temp file was renamed or linked into place, or deduplicated.
    func markDone() { done = true }
    private var done = false

    /// Closes the file (once it has its object name, or to drop it).
    func close() {
        if !closed { fd.close(); closed = true }
    }

    /// Closes and removes the temp file.
    public func discard() {
        close()
        if !done && !isUnnamed { try? files.unlink(tempPath) }
        done = true
    }
}
